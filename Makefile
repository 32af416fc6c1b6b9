# Builds greenhook in release mode and installs the two files a user needs:
#
#   make install PREFIX=$HOME/.local
#       PREFIX/bin/greenhook          the launcher (greenhook run / doctor)
#       PREFIX/lib/libgreenhook.so    the library it preloads
#   make uninstall PREFIX=$HOME/.local
#
# `cargo install` alone would ship the launcher without the library. The
# launcher looks for the library beside itself, then in ../lib/ from its own
# directory, so the two files keep this layout; DESTDIR (for packaging)
# prefixes both and changes nothing between them.

PREFIX ?= /usr/local
CARGO ?= cargo
# Where cargo builds (cargo's own default, or CARGO_TARGET_DIR if set).
CARGO_TARGET_DIR ?= target
RELEASE := $(CARGO_TARGET_DIR)/release

.PHONY: all build install uninstall

all: build

# Always ask cargo: it knows whether the sources changed (make does not).
build:
	CARGO_TARGET_DIR='$(CARGO_TARGET_DIR)' $(CARGO) build --release -p greenhook -p greenhook-launcher

install: build
	install -d '$(DESTDIR)$(PREFIX)/bin' '$(DESTDIR)$(PREFIX)/lib'
	install -m 755 '$(RELEASE)/greenhook' '$(DESTDIR)$(PREFIX)/bin/greenhook'
	install -m 755 '$(RELEASE)/libgreenhook.so' '$(DESTDIR)$(PREFIX)/lib/libgreenhook.so'

uninstall:
	rm -f '$(DESTDIR)$(PREFIX)/bin/greenhook' '$(DESTDIR)$(PREFIX)/lib/libgreenhook.so'
