/*
 * go_note.h: Go's build ID note (an ELF note named "Go", type 4), which Go's
 * linker writes into every executable and shared library it makes; an
 * object that includes this looks to greenhook like Go's, whose threads
 * stay OS threads.
 */
#ifndef GREENHOOK_GO_NOTE_H
#define GREENHOOK_GO_NOTE_H

__attribute__((used, section(".note.go.buildid"), aligned(4))) static const struct {
    unsigned namesz, descsz, type;
    char name[4];
    char desc[8];
} go_build_id = {4, 8, 4, "Go", "notreal!"};

#endif
