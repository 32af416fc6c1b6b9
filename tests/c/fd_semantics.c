/*
 * fd_semantics: file-descriptor semantics a blocking-call interposer must keep
 * exactly: the user's O_NONBLOCK (fcntl, ioctl FIONBIO, SOCK_NONBLOCK,
 * MSG_DONTWAIT), socket timeouts, waking blocked readers, and the error
 * returns of bad arguments.
 *
 * usage: fd_semantics [CHECK...]
 *   no arguments runs every check; otherwise only the named ones.
 *
 * stdout: one line per call, "name: ret=<r> errno=<NAME>" (errno=0 when the
 *         call succeeded), or "name: <facts>" for flag and wake-up checks.
 * stderr: "<name>.time_ms=<n>" for timed calls, "time_ms=<total>".
 * Any result other than the expected one: "FAIL ..." on stderr, exit 1.
 * alarm(20) turns a hang (e.g. a reader that never comes back) into a death
 * by SIGALRM.
 *
 * close_while_blocked (chosen design): thread R blocks in read() on a pipe's
 * read end; main closes that fd (close must return 0), then writes one byte
 * to the write end and closes it. On Linux unpatched, close() does NOT wake
 * R: R's read holds its own reference to the pipe and returns the byte (1).
 * An interposer may instead wake R at close() (e.g. with -1/EBADF); both are
 * accepted. stdout only records that close returned 0 and that R came back
 * within the alarm; R's actual return and errno go to stderr
 * ("close_while_blocked.reader ret=... errno=..."), so both runs compare
 * equal. What is required: R must come back, and the process must not hang.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <stdint.h>
#include <limits.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

/* ---------- helpers ---------- */

static void line(const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", name);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

/* Records "name: ret=R errno=E" and checks it against the expectation. */
static void expect_call(const char *name, long ret, int err, long want_ret, int want_err)
{
    if (ret >= 0)
        err = 0;
    line(name, "ret=%ld errno=%s", ret, en(err));
    if (ret != want_ret || err != want_err)
        fail("%s: got ret=%ld errno=%s, want ret=%ld errno=%s", name, ret, en(err), want_ret, en(want_err));
}

#define CALL(name, expr, want_ret, want_err)                                                        \
    do {                                                                                            \
        errno = 0;                                                                                  \
        long _r = (long)(expr);                                                                     \
        int _e = errno;                                                                             \
        expect_call(name, _r, _e, want_ret, want_err);                                              \
    } while (0)

static void timing(const char *name, long long ms)
{
    fprintf(stderr, "%s.time_ms=%lld\n", name, ms);
}

/* O_ACCMODE and O_NONBLOCK/O_APPEND rendered as names, plus the raw value */
static const char *flags_str(int fl)
{
    static char buf[128];
    const char *acc = (fl & O_ACCMODE) == O_RDONLY ? "O_RDONLY" : (fl & O_ACCMODE) == O_WRONLY ? "O_WRONLY" : "O_RDWR";
    snprintf(buf, sizeof buf, "%#x(%s%s%s)", fl, acc, fl & O_NONBLOCK ? "|O_NONBLOCK" : "", fl & O_APPEND ? "|O_APPEND" : "");
    return buf;
}

static void xpipe(int p[2])
{
    if (pipe(p) != 0)
        fail("pipe: %s", strerror(errno));
}

static void xsocketpair(int sv[2])
{
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        fail("socketpair: %s", strerror(errno));
}

struct delayed_write {
    int fd;
    long ms;
};

static void *write_later(void *arg)
{
    struct delayed_write *d = arg;
    usleep((useconds_t)(d->ms * 1000));
    if (write(d->fd, "x", 1) != 1)
        fail("delayed write: %s", strerror(errno));
    return NULL;
}

/* A free TCP port on 127.0.0.1 that nothing listens on (bound, then closed). */
static struct sockaddr_in closed_port(void)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof sa) != 0)
        fail("bind: %s", strerror(errno));
    socklen_t len = sizeof sa;
    getsockname(s, (struct sockaddr *)&sa, &len);
    close(s);
    return sa;
}

/* ---------- O_NONBLOCK ---------- */

static void check_nonblock_fcntl(void)
{
    int p[2];
    char c;
    xpipe(p);
    line("pipe_getfl_initial", "read_end=%s", flags_str(fcntl(p[0], F_GETFL)));
    line("pipe_getfl_initial", "write_end=%s", flags_str(fcntl(p[1], F_GETFL)));
    CALL("setfl_nonblock", fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK), 0, 0);
    int fl = fcntl(p[0], F_GETFL);
    line("pipe_getfl_nonblock", "read_end=%s", flags_str(fl));
    if (fl != (O_RDONLY | O_NONBLOCK))
        fail("F_GETFL after F_SETFL O_NONBLOCK = %#x", fl);
    line("pipe_getfl_nonblock", "write_end=%s", flags_str(fcntl(p[1], F_GETFL)));
    long long t0 = now_ms();
    CALL("read_nonblock_empty_pipe", read(p[0], &c, 1), -1, EAGAIN);
    timing("read_nonblock_empty_pipe", now_ms() - t0);

    /* dup shares the open file description, so it shares O_NONBLOCK */
    int d = dup(p[0]);
    line("dup_getfl", "%s", flags_str(fcntl(d, F_GETFL)));
    CALL("read_nonblock_dup", read(d, &c, 1), -1, EAGAIN);
    CALL("setfl_clear_via_dup", fcntl(d, F_SETFL, 0), 0, 0);
    line("pipe_getfl_cleared_via_dup", "read_end=%s", flags_str(fcntl(p[0], F_GETFL)));
    close(d);

    /* blocking again: a read waits for a write made 50 ms later */
    struct delayed_write dw = { p[1], 50 };
    pthread_t t = spawn(write_later, &dw);
    t0 = now_ms();
    CALL("read_blocking_again", read(p[0], &c, 1), 1, 0);
    long long e = now_ms() - t0;
    timing("read_blocking_again", e);
    join(t);
    if (e < 40)
        fail("blocking read returned after %lld ms, before the write", e);

    /* F_GETFD/F_SETFD are separate from the status flags */
    CALL("getfd_initial", fcntl(p[0], F_GETFD), 0, 0);
    CALL("setfd_cloexec", fcntl(p[0], F_SETFD, FD_CLOEXEC), 0, 0);
    CALL("getfd_cloexec", fcntl(p[0], F_GETFD), FD_CLOEXEC, 0);
    line("getfl_after_cloexec", "%s", flags_str(fcntl(p[0], F_GETFL)));
    close(p[0]);
    close(p[1]);

    /* pipe2(O_NONBLOCK) and SOCK_NONBLOCK set the flag at creation */
    xpipe(p);
    close(p[0]);
    close(p[1]);
    if (pipe2(p, O_NONBLOCK) != 0)
        fail("pipe2: %s", strerror(errno));
    line("pipe2_nonblock_getfl", "read_end=%s", flags_str(fcntl(p[0], F_GETFL)));
    line("pipe2_nonblock_getfl", "write_end=%s", flags_str(fcntl(p[1], F_GETFL)));
    CALL("read_pipe2_nonblock_empty", read(p[0], &c, 1), -1, EAGAIN);
    close(p[0]);
    close(p[1]);

    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    line("socket_nonblock_getfl", "%s", flags_str(fcntl(s, F_GETFL)));
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(s, (struct sockaddr *)&sa, sizeof sa);
    listen(s, 8);
    CALL("accept_nonblock_no_pending", accept(s, NULL, NULL), -1, EAGAIN);
    close(s);
}

static void check_nonblock_fionbio(void)
{
    int sv[2];
    char c;
    xsocketpair(sv);
    line("socketpair_getfl_initial", "%s", flags_str(fcntl(sv[0], F_GETFL)));
    int on = 1, off = 0;
    CALL("ioctl_fionbio_on", ioctl(sv[0], FIONBIO, &on), 0, 0);
    line("socketpair_getfl_fionbio", "%s", flags_str(fcntl(sv[0], F_GETFL)));
    if (!(fcntl(sv[0], F_GETFL) & O_NONBLOCK))
        fail("FIONBIO did not show in F_GETFL");
    CALL("recv_fionbio_empty", recv(sv[0], &c, 1, 0), -1, EAGAIN);
    CALL("read_fionbio_empty", read(sv[0], &c, 1), -1, EAGAIN);
    CALL("ioctl_fionbio_off", ioctl(sv[0], FIONBIO, &off), 0, 0);
    line("socketpair_getfl_fionbio_off", "%s", flags_str(fcntl(sv[0], F_GETFL)));

    /* MSG_DONTWAIT on a blocking socket: EAGAIN now, and the fd stays blocking */
    CALL("recv_msg_dontwait_empty", recv(sv[0], &c, 1, MSG_DONTWAIT), -1, EAGAIN);
    line("getfl_after_msg_dontwait", "%s", flags_str(fcntl(sv[0], F_GETFL)));

    /* FIONREAD reports queued bytes */
    if (write(sv[1], "abc", 3) != 3)
        fail("write: %s", strerror(errno));
    int n = -1;
    CALL("ioctl_fionread", ioctl(sv[0], FIONREAD, &n), 0, 0);
    line("fionread_value", "%d", n);
    if (n != 3)
        fail("FIONREAD = %d", n);
    close(sv[0]);
    close(sv[1]);
}

/* ---------- socket timeouts ---------- */

static void check_so_rcvtimeo(void)
{
    int sv[2];
    char c;
    xsocketpair(sv);
    struct timeval tv = { 0, 200000 };
    CALL("setsockopt_so_rcvtimeo", setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0, 0);
    struct timeval got = { 0, 0 };
    socklen_t len = sizeof got;
    getsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &got, &len);
    line("getsockopt_so_rcvtimeo", "%ld.%06ld", (long)got.tv_sec, (long)got.tv_usec);

    long long t0 = now_ms();
    CALL("recv_so_rcvtimeo", recv(sv[0], &c, 1, 0), -1, EAGAIN);
    long long e1 = now_ms() - t0;
    timing("recv_so_rcvtimeo", e1);
    t0 = now_ms();
    CALL("read_so_rcvtimeo", read(sv[0], &c, 1), -1, EAGAIN);
    long long e2 = now_ms() - t0;
    timing("read_so_rcvtimeo", e2);
    if (e1 < 200 || e2 < 200)
        fail("SO_RCVTIMEO returned early (%lld, %lld ms)", e1, e2);

    /* Linux: recv with length 0 on an empty AF_UNIX stream socket waits too */
    t0 = now_ms();
    CALL("recv_len0_so_rcvtimeo", recv(sv[0], &c, 0, 0), -1, EAGAIN);
    timing("recv_len0_so_rcvtimeo", now_ms() - t0);
    /* ... while read with length 0 returns 0 at once */
    t0 = now_ms();
    CALL("read_len0_socket", read(sv[0], &c, 0), 0, 0);
    timing("read_len0_socket", now_ms() - t0);

    /* data arriving within the timeout is returned */
    struct delayed_write dw = { sv[1], 50 };
    pthread_t t = spawn(write_later, &dw);
    t0 = now_ms();
    CALL("recv_so_rcvtimeo_data", recv(sv[0], &c, 1, 0), 1, 0);
    timing("recv_so_rcvtimeo_data", now_ms() - t0);
    join(t);

    /* SO_SNDTIMEO: fill the send buffer, then a blocking write times out */
    tv.tv_sec = 0;
    tv.tv_usec = 200000;
    CALL("setsockopt_so_sndtimeo", setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), 0, 0);
    static char big[4096];
    long filled = 0;
    for (;;) {
        ssize_t n = send(sv[0], big, sizeof big, MSG_DONTWAIT);
        if (n < 0)
            break;
        filled += n;
    }
    for (;;) {
        ssize_t n = send(sv[0], big, 1, MSG_DONTWAIT);
        if (n < 0)
            break;
        filled += n;
    }
    if (filled <= 0)
        fail("could not fill the socket buffer");
    t0 = now_ms();
    CALL("write_so_sndtimeo_full", write(sv[0], big, 1), -1, EAGAIN);
    long long e3 = now_ms() - t0;
    timing("write_so_sndtimeo_full", e3);
    if (e3 < 200)
        fail("SO_SNDTIMEO returned early (%lld ms)", e3);
    close(sv[0]);
    close(sv[1]);
}

/* ---------- waking blocked readers ---------- */

struct reader {
    int fd;
    int use_recv;
    ssize_t ret;
    int err;
    char c;
    volatile int started;
};

static void *blocked_reader(void *arg)
{
    struct reader *r = arg;
    r->started = 1;
    errno = 0;
    r->ret = r->use_recv ? recv(r->fd, &r->c, 1, 0) : read(r->fd, &r->c, 1);
    r->err = errno;
    return NULL;
}

static void check_close_while_blocked(void)
{
    int p[2];
    /* Under the shim the reader is woken at close() and the read end is
     * gone, so the feeding write below gets EPIPE: don't die of SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    xpipe(p);
    struct reader r = { p[0], 0, 0, 0, 0, 0 };
    pthread_t t = spawn(blocked_reader, &r);
    while (!r.started)
        usleep(1000);
    usleep(100000); /* let it block in read() */
    errno = 0;
    int rc = close(p[0]);
    int e = errno;
    usleep(50000);
    /* Unpatched, R is still blocked; feed it so both runs terminate. */
    ssize_t w = write(p[1], "z", 1);
    int we = errno;
    long long t0 = now_ms();
    join(t);
    timing("close_while_blocked.join_after_write", now_ms() - t0);
    fprintf(stderr, "close_while_blocked.reader ret=%zd errno=%s (write after close: ret=%zd errno=%s)\n",
            r.ret, en(r.ret < 0 ? r.err : 0), w, en(w < 0 ? we : 0));
    close(p[1]);
    line("close_while_blocked", "close_ret=%d close_errno=%s reader_returned=yes", rc, en(rc < 0 ? e : 0));
    if (rc != 0)
        fail("close returned %d (%s)", rc, en(e));
    if (!(r.ret == 1 && r.c == 'z') && !(r.ret < 0 && r.err == EBADF))
        fail("reader came back with ret=%zd errno=%s", r.ret, en(r.err));
}

/* A read that had to wait, then succeeded, leaves errno as the caller had
 * it (under the shim its first attempt met EAGAIN on the way). */
static void *errno_reader(void *arg)
{
    struct reader *r = arg;
    r->started = 1;
    errno = EILSEQ;
    r->ret = read(r->fd, &r->c, 1);
    r->err = errno;
    return NULL;
}

static void check_errno_after_wait(void)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        fail("socketpair: %s", en(errno));
    struct reader r = { sv[0], 0, 0, 0, 0, 0 };
    pthread_t t = spawn(errno_reader, &r);
    while (!r.started)
        usleep(1000);
    usleep(20000); /* let it wait */
    if (write(sv[1], "q", 1) != 1)
        fail("write: %s", en(errno));
    join(t);
    line("errno_after_wait", "read ret=%zd errno=%s", r.ret, en(r.err));
    EXPECT_EQ("read", r.ret, 1);
    EXPECT_EQ("errno after a read that waited", r.err, EILSEQ);
    close(sv[0]);
    close(sv[1]);
}

/* An fd closed with a raw syscall(SYS_close) (or SYS_close_range) after a
 * thread waited on it: the next socket given the same number must work.
 * (Under the shim the first wait registered the number with the hub; a
 * registration left behind would swallow the new socket's events.) */
static void check_raw_close_reuse(void)
{
    for (int range = 0; range < 2; range++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
            fail("socketpair: %s", en(errno));
        struct reader r = { sv[0], 0, 0, 0, 0, 0 };
        pthread_t t = spawn(blocked_reader, &r);
        while (!r.started)
            usleep(1000);
        usleep(20000); /* let it wait */
        if (write(sv[1], "a", 1) != 1)
            fail("write: %s", en(errno));
        join(t);
        EXPECT_EQ("first read", r.ret, 1);
        int n = sv[0];
        long rc = range ? syscall(SYS_close_range, (unsigned)n, (unsigned)n, 0) : syscall(SYS_close, n);
        EXPECT_EQ("raw close", rc, 0);
        close(sv[1]);
        int sv2[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv2) != 0)
            fail("socketpair: %s", en(errno));
        if (sv2[0] != n)
            fail("the number %d was not reused (got %d)", n, sv2[0]);
        struct reader r2 = { sv2[0], 0, 0, 0, 0, 0 };
        t = spawn(blocked_reader, &r2);
        while (!r2.started)
            usleep(1000);
        usleep(20000);
        if (write(sv2[1], "b", 1) != 1)
            fail("write: %s", en(errno));
        join(t);
        EXPECT_EQ("read on the reused number", r2.ret, 1);
        EXPECT_EQ("byte read", r2.c, 'b');
        close(sv2[0]);
        close(sv2[1]);
    }
    line("raw_close_reuse", "ok");
}

struct writer {
    int fd;
    ssize_t ret, again;
    int err, again_err;
    volatile int started;
};

/* Sends 4 MiB (blocks once the socket is full), then 1 byte more. */
static void *blocked_writer(void *arg)
{
    struct writer *w = arg;
    static char big[4 << 20];
    w->started = 1;
    errno = 0;
    w->ret = send(w->fd, big, sizeof big, MSG_NOSIGNAL);
    w->err = errno;
    errno = 0;
    w->again = send(w->fd, big, 1, MSG_NOSIGNAL);
    w->again_err = errno;
    return NULL;
}

static void check_shutdown_wakes(void)
{
    int sv[2];
    xsocketpair(sv);
    struct reader r = { sv[0], 1, 0, 0, 0, 0 };
    pthread_t t = spawn(blocked_reader, &r);
    while (!r.started)
        usleep(1000);
    usleep(100000);
    long long t0 = now_ms();
    CALL("shutdown_rd", shutdown(sv[0], SHUT_RD), 0, 0);
    join(t);
    timing("shutdown_rd_wake", now_ms() - t0);
    expect_call("shutdown_rd_blocked_recv", r.ret, r.err, 0, 0);
    close(sv[0]);
    close(sv[1]);

    xsocketpair(sv);
    struct reader r2 = { sv[0], 0, 0, 0, 0, 0 };
    t = spawn(blocked_reader, &r2);
    while (!r2.started)
        usleep(1000);
    usleep(100000);
    CALL("peer_shutdown_wr", shutdown(sv[1], SHUT_WR), 0, 0);
    join(t);
    expect_call("peer_shutdown_wr_blocked_read", r2.ret, r2.err, 0, 0);
    close(sv[0]);
    close(sv[1]);

    /* a writer blocked on a full socket whose own side another thread
       shuts down for writing: part of it sent, then EPIPE (a Unix socket
       never becomes writable for epoll then: greenhook's waiter hung) */
    xsocketpair(sv);
    struct writer w = { sv[0], 0, 0, 0, 0, 0 };
    t = spawn(blocked_writer, &w);
    while (!w.started)
        usleep(1000);
    usleep(100000);
    CALL("own_shutdown_wr", shutdown(sv[0], SHUT_WR), 0, 0);
    join(t);
    line("own_shutdown_wr_blocked_send", "sent %s, then ret=%zd errno=%s", w.ret > 0 && w.ret < (4 << 20) ? "part" : "other",
         w.again, en(w.again < 0 ? w.again_err : 0));
    close(sv[0]);
    close(sv[1]);

    /* the peer closing its end: EOF for a blocked reader */
    xsocketpair(sv);
    struct reader r3 = { sv[0], 0, 0, 0, 0, 0 };
    t = spawn(blocked_reader, &r3);
    while (!r3.started)
        usleep(1000);
    usleep(100000);
    CALL("peer_close", close(sv[1]), 0, 0);
    join(t);
    expect_call("peer_close_blocked_read", r3.ret, r3.err, 0, 0);
    close(sv[0]);
}

/* ---------- bad inputs ---------- */

static void check_bad_fds(void)
{
    char buf[8];
    int p[2];
    xpipe(p);
    int closed_fd = p[0];
    close(p[0]);
    close(p[1]);
    CALL("read_fd_minus1", read(-1, buf, 1), -1, EBADF);
    CALL("write_fd_minus1", write(-1, "x", 1), -1, EBADF);
    CALL("read_closed_fd", read(closed_fd, buf, 1), -1, EBADF);
    CALL("write_closed_fd", write(closed_fd, "x", 1), -1, EBADF);
    CALL("recv_closed_fd", recv(closed_fd, buf, 1, 0), -1, EBADF);
    CALL("close_closed_fd", close(closed_fd), -1, EBADF);
    CALL("fcntl_getfl_closed_fd", fcntl(closed_fd, F_GETFL), -1, EBADF);

    xpipe(p);
    CALL("read_write_end", read(p[1], buf, 1), -1, EBADF);
    CALL("write_read_end", write(p[0], "x", 1), -1, EBADF);
    CALL("recv_on_pipe", recv(p[0], buf, 1, MSG_DONTWAIT), -1, ENOTSOCK);
    CALL("accept_on_pipe", accept(p[0], NULL, NULL), -1, ENOTSOCK);

    /* a NULL buffer with data waiting: EFAULT, and the data stays queued */
    if (write(p[1], "hello", 5) != 5)
        fail("write: %s", strerror(errno));
    void *volatile nullp = NULL;
    CALL("read_null_buf_nonempty_pipe", read(p[0], nullp, 5), -1, EFAULT);
    int n = -1;
    ioctl(p[0], FIONREAD, &n);
    line("fionread_after_efault", "%d", n);
    CALL("write_null_buf", write(p[1], nullp, 5), -1, EFAULT);

    /* zero-length read on an empty blocking pipe returns 0 without waiting */
    char tmp[5];
    if (read(p[0], tmp, 5) != 5)
        fail("drain: %s", strerror(errno));
    long long t0 = now_ms();
    CALL("read_len0_empty_pipe", read(p[0], buf, 0), 0, 0);
    timing("read_len0_empty_pipe", now_ms() - t0);

    /* write to a pipe with no reader: EPIPE (SIGPIPE ignored) */
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    CALL("write_no_reader", write(p[1], "x", 1), -1, EPIPE);
    signal(SIGPIPE, SIG_DFL);
    close(p[1]);

    int sv[2];
    xsocketpair(sv);
    close(sv[1]);
    CALL("send_nosignal_peer_closed", send(sv[0], "x", 1, MSG_NOSIGNAL), -1, EPIPE);
    close(sv[0]);

    int d = open("/", O_RDONLY | O_DIRECTORY);
    CALL("read_directory", read(d, buf, 1), -1, EISDIR);
    close(d);
}

static void check_bad_sleep(void)
{
    struct timespec ts = { 0, 1000000000L };
    CALL("nanosleep_nsec_1e9", nanosleep(&ts, NULL), -1, EINVAL);
    ts.tv_sec = -1;
    ts.tv_nsec = 0;
    CALL("nanosleep_negative_sec", nanosleep(&ts, NULL), -1, EINVAL);
    ts.tv_sec = 0;
    ts.tv_nsec = -1;
    CALL("nanosleep_negative_nsec", nanosleep(&ts, NULL), -1, EINVAL);

    /* clock_nanosleep returns the error number and leaves errno alone */
    ts.tv_sec = 0;
    ts.tv_nsec = 1000000000L;
    errno = ENOENT; /* sentinel */
    int r = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
    int e = errno;
    line("clock_nanosleep_nsec_1e9", "ret=%s errno=%s", en(r), en(e));
    if (r != EINVAL || e != ENOENT)
        fail("clock_nanosleep bad nsec: ret=%s errno=%s", en(r), en(e));
    ts.tv_sec = -1;
    ts.tv_nsec = 0;
    errno = ENOENT;
    r = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
    e = errno;
    line("clock_nanosleep_negative_sec", "ret=%s errno=%s", en(r), en(e));
    if (r != EINVAL || e != ENOENT)
        fail("clock_nanosleep negative sec: ret=%s errno=%s", en(r), en(e));
    ts.tv_sec = 0;
    ts.tv_nsec = 1000;
    errno = ENOENT;
    r = clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &ts, NULL);
    e = errno;
    line("clock_nanosleep_thread_cputime", "ret=%s errno=%s", en(r), en(e));
    if (r != EINVAL || e != ENOENT)
        fail("clock_nanosleep CLOCK_THREAD_CPUTIME_ID: ret=%s errno=%s", en(r), en(e));
    /* an absolute deadline in the past returns 0 at once */
    ts.tv_sec = 0;
    ts.tv_nsec = 0;
    errno = ENOENT;
    r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    e = errno;
    line("clock_nanosleep_abs_past", "ret=%s errno=%s", en(r), en(e));
    if (r != 0 || e != ENOENT)
        fail("clock_nanosleep abs past: ret=%s errno=%s", en(r), en(e));
    ts.tv_sec = 0;
    ts.tv_nsec = 0;
    CALL("nanosleep_zero", nanosleep(&ts, NULL), 0, 0);
    CALL("usleep_zero", usleep(0), 0, 0);
    CALL("sleep_zero", sleep(0), 0, 0);
}

/* Bad pointers to the sleeps, from a thread while another thread lives
 * (so that, under the shim, the sleeps go through the hub): EFAULT, never a
 * crash in the hook. */
static void *bad_sleep_pointers(void *arg)
{
    (void)arg;
    const struct timespec *bad = (const struct timespec *)(uintptr_t)16;
    CALL("nanosleep_bad_pointer", nanosleep(bad, NULL), -1, EFAULT);
    /* Above every stack: a stack pointer's range check must not take them
     * for the caller's own memory. */
    const struct timespec *high = (const struct timespec *)(uintptr_t)0xffff800000000000ull;
    CALL("nanosleep_kernel_half_pointer", nanosleep(high, NULL), -1, EFAULT);
    const struct timespec *last = (const struct timespec *)(uintptr_t)-8;
    CALL("nanosleep_wrapping_pointer", nanosleep(last, NULL), -1, EFAULT);
    errno = ENOENT;
    int r = clock_nanosleep(CLOCK_MONOTONIC, 0, bad, NULL);
    int e = errno;
    line("clock_nanosleep_bad_pointer", "ret=%s errno=%s", en(r), en(e));
    if (r != EFAULT || e != ENOENT)
        fail("clock_nanosleep bad pointer: ret=%s errno=%s", en(r), en(e));
    return NULL;
}

static void *idle_100ms(void *arg)
{
    (void)arg;
    usleep(100000);
    return NULL;
}

static void check_bad_sleep_pointers(void)
{
    pthread_t idle = spawn(idle_100ms, NULL);
    join(spawn(bad_sleep_pointers, NULL));
    join(idle);
}

static void check_bad_poll_select(void)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    nfds_t nfds = (nfds_t)rl.rlim_cur + 1;
    struct pollfd *pfds = calloc(nfds, sizeof *pfds);
    for (nfds_t i = 0; i < nfds; i++)
        pfds[i].fd = -1;
    CALL("poll_nfds_over_rlimit", poll(pfds, nfds, 0), -1, EINVAL);
    free(pfds);

    /* a closed fd in a poll set is reported as POLLNVAL and counted */
    int p[2];
    xpipe(p);
    int closed_fd = p[0];
    close(p[0]);
    struct pollfd pf[2] = { { closed_fd, POLLIN, 0 }, { -1, POLLIN, 0 } };
    errno = 0;
    int r = poll(pf, 2, 1000);
    line("poll_closed_fd", "ret=%d revents0=%#x revents_negative_fd=%#x", r, pf[0].revents, pf[1].revents);
    if (r != 1 || pf[0].revents != POLLNVAL || pf[1].revents != 0)
        fail("poll with a closed fd");

    fd_set rs;
    FD_ZERO(&rs);
    struct timeval tv = { 0, 0 };
    CALL("select_nfds_negative", select(-1, &rs, NULL, NULL, &tv), -1, EINVAL);
    FD_ZERO(&rs);
    FD_SET(closed_fd, &rs);
    tv.tv_sec = 1;
    tv.tv_usec = 0;
    CALL("select_closed_fd", select(closed_fd + 1, &rs, NULL, NULL, &tv), -1, EBADF);
    FD_ZERO(&rs);
    tv.tv_sec = -1;
    tv.tv_usec = 0;
    CALL("select_negative_timeout", select(0, &rs, NULL, NULL, &tv), -1, EINVAL);
    close(p[1]);

    int ep = epoll_create1(0);
    struct epoll_event ev[1];
    volatile int minus1 = -1; /* hidden from -Wstringop-overflow */
    CALL("epoll_wait_maxevents_0", epoll_wait(ep, ev, 0, 0), -1, EINVAL);
    CALL("epoll_wait_maxevents_negative", epoll_wait(ep, ev, minus1, 0), -1, EINVAL);
    /* the highest fd number allowed is not open (closed_fd was reused by epoll_create1) */
    int high_fd = (int)rl.rlim_cur - 1;
    if (fcntl(high_fd, F_GETFD) != -1)
        fail("fd %d is open", high_fd);
    CALL("epoll_wait_closed_fd", epoll_wait(high_fd, ev, 1, 0), -1, EBADF);
    xpipe(p);
    CALL("epoll_wait_not_epoll_fd", epoll_wait(p[0], ev, 1, 0), -1, EINVAL);
    close(p[0]);
    close(p[1]);
    close(ep);
}

static void check_bad_sockets(void)
{
    struct sockaddr_in sa = closed_port();
    int s = socket(AF_INET, SOCK_STREAM, 0);
    long long t0 = now_ms();
    CALL("connect_closed_port", connect(s, (struct sockaddr *)&sa, sizeof sa), -1, ECONNREFUSED);
    timing("connect_closed_port", now_ms() - t0);
    /* A retry on the same socket tries again (ECONNABORTED if the first
     * attempt left the socket half-connected). */
    CALL("connect_closed_port_again", connect(s, (struct sockaddr *)&sa, sizeof sa), -1, ECONNREFUSED);
    close(s);

    /* non-blocking connect: EINPROGRESS, then POLLOUT|POLLERR|POLLHUP and SO_ERROR */
    s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CALL("connect_nonblock_closed_port", connect(s, (struct sockaddr *)&sa, sizeof sa), -1, EINPROGRESS);
    struct pollfd pf = { s, POLLOUT, 0 };
    int r = poll(&pf, 1, 5000);
    int err = -1;
    socklen_t len = sizeof err;
    getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
    int err2 = -1;
    getsockopt(s, SOL_SOCKET, SO_ERROR, &err2, &len);
    line("connect_nonblock_result", "poll=%d revents=%#x so_error=%s so_error_again=%s", r, pf.revents, en(err),
         en(err2));
    if (r != 1 || err != ECONNREFUSED || err2 != 0)
        fail("non-blocking connect result");
    close(s);

    s = socket(AF_INET, SOCK_STREAM, 0);
    CALL("accept_not_listening", accept(s, NULL, NULL), -1, EINVAL);
    char c;
    CALL("recv_not_connected", recv(s, &c, 1, 0), -1, ENOTCONN);
    CALL("read_not_connected", read(s, &c, 1), -1, ENOTCONN);
    CALL("send_not_connected", send(s, "x", 1, MSG_NOSIGNAL), -1, EPIPE);
    close(s);

    /* bad arrays on a connected socket: the kernel's answer, and no crash
     * (the shim must not read them before the kernel has accepted them) */
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0)
        fail("socketpair: %s", en(errno));
    static struct iovec two[2] = { { "x", 1 }, { "y", 1 } };
    volatile int too_many = IOV_MAX + 1;
    CALL("writev_too_many", writev(sp[1], two, too_many), -1, EINVAL);
    struct iovec *volatile no_iov = NULL;
    CALL("writev_null", writev(sp[1], no_iov, 1), -1, EFAULT);
    struct msghdr *bad_msg = (struct msghdr *)(uintptr_t)16;
    CALL("sendmsg_bad_msghdr", sendmsg(sp[1], bad_msg, MSG_NOSIGNAL), -1, EFAULT);
    struct msghdr mh = { 0 };
    mh.msg_iov = (struct iovec *)(uintptr_t)16;
    mh.msg_iovlen = 1;
    CALL("sendmsg_bad_iov", sendmsg(sp[1], &mh, MSG_NOSIGNAL), -1, EFAULT);
    close(sp[0]);
    close(sp[1]);

    /* a listening socket's accept() with SO_RCVTIMEO times out with EAGAIN */
    s = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(s, (struct sockaddr *)&sa, sizeof sa);
    listen(s, 4);
    struct timeval tv = { 0, 100000 };
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    t0 = now_ms();
    CALL("accept_so_rcvtimeo", accept(s, NULL, NULL), -1, EAGAIN);
    long long e = now_ms() - t0;
    timing("accept_so_rcvtimeo", e);
    if (e < 100)
        fail("accept with SO_RCVTIMEO returned after %lld ms", e);
    close(s);
}

/* ---------- socket kinds: what a read or write on each must keep ---------- */

static void *socket_kinds_body(void *arg)
{
    (void)arg;
    char buf[64];
    int sv[2];
    /* SOCK_SEQPACKET: each write is one record, a read takes one */
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0)
        fail("socketpair seqpacket: %s", strerror(errno));
    CALL("seqpacket_write_3", write(sv[1], "abc", 3), 3, 0);
    CALL("seqpacket_write_2", write(sv[1], "de", 2), 2, 0);
    struct iovec two[2] = {{"fg", 2}, {"hij", 3}};
    CALL("seqpacket_writev_5", writev(sv[1], two, 2), 5, 0);
    CALL("seqpacket_read_first", read(sv[0], buf, sizeof buf), 3, 0);
    CALL("seqpacket_read_second", read(sv[0], buf, sizeof buf), 2, 0);
    CALL("seqpacket_readv_third", readv(sv[0], &(struct iovec){buf, sizeof buf}, 1), 5, 0);
    /* a read that waits for the record a thread writes 100 ms later */
    struct delayed_write d = {sv[1], 100};
    pthread_t w;
    pthread_create(&w, NULL, write_later, &d);
    CALL("seqpacket_read_waits", read(sv[0], buf, sizeof buf), 1, 0);
    pthread_join(w, NULL);
    close(sv[0]);
    close(sv[1]);
    /* SOCK_DGRAM: a zero-length read takes nothing */
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) != 0)
        fail("socketpair dgram: %s", strerror(errno));
    CALL("dgram_write", write(sv[1], "hello", 5), 5, 0);
    CALL("dgram_read_len0", read(sv[0], buf, 0), 0, 0);
    CALL("dgram_read_after_len0", read(sv[0], buf, sizeof buf), 5, 0);
    CALL("dgram_write_again", write(sv[1], "x", 1), 1, 0);
    volatile size_t huge = (size_t)-1; /* volatile: past the compiler's size check */
    CALL("dgram_read_count_over_ssize_max", read(sv[0], buf, huge), -1, EFAULT);
    CALL("dgram_write_count_over_ssize_max", write(sv[1], buf, huge), -1, EFAULT);
    CALL("dgram_read_after_bad_count", recv(sv[0], buf, sizeof buf, 0), 1, 0);
    close(sv[0]);
    close(sv[1]);
    /* the flags a program sees on a data socket and a listener */
    xsocketpair(sv);
    line("stream_getfl", "%s", flags_str(fcntl(sv[0], F_GETFL)));
    CALL("stream_setfl_nonblock", fcntl(sv[0], F_SETFL, O_NONBLOCK), 0, 0);
    CALL("stream_read_user_nonblock", read(sv[0], buf, 1), -1, EAGAIN);
    CALL("stream_setfl_clear", fcntl(sv[0], F_SETFL, 0), 0, 0);
    line("stream_getfl_cleared", "%s", flags_str(fcntl(sv[0], F_GETFL)));
    d.fd = sv[1];
    pthread_create(&w, NULL, write_later, &d);
    CALL("stream_read_waits_again", read(sv[0], buf, sizeof buf), 1, 0);
    pthread_join(w, NULL);
    close(sv[0]);
    close(sv[1]);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CALL("listener_bind", bind(l, (struct sockaddr *)&a, sizeof a), 0, 0);
    CALL("listener_listen", listen(l, 4), 0, 0);
    line("listener_getfl", "%s", flags_str(fcntl(l, F_GETFL)));
    int dl = dup(l);
    line("listener_dup_getfl", "%s", flags_str(fcntl(dl, F_GETFL)));
    close(dl);
    close(l);
    return NULL;
}

/* Run in a thread: under greenhook a fiber, whose waits go to the hub. */
static void check_socket_kinds(void)
{
    pthread_t t;
    pthread_create(&t, NULL, socket_kinds_body, NULL);
    pthread_join(t, NULL);
}

/* ---------- driver ---------- */

/* preadv2/pwritev2 at the file position of a pipe or socket: blocking
   calls that wait for data or room (they met EAGAIN, before: the hooks
   did not exist and the fds are non-blocking underneath), with the
   caller's RWF_NOWAIT still answered at once, and an offset refused. A
   reader that comes 100 ms late: */
struct delayed {
    int fd;
    size_t n;
};

static void *read_later(void *arg)
{
    struct delayed *d = arg;
    usleep(100000);
    static char sink[1 << 16];
    size_t done = 0;
    while (done < d->n) {
        ssize_t r = read(d->fd, sink, sizeof sink);
        if (r <= 0)
            break;
        done += r;
    }
    d->n = done;
    return NULL;
}

static void check_rw_flags(void)
{
    int p[2], sv[2];
    char b[16];
    struct iovec v = { b, sizeof b };
    if (pipe(p) != 0)
        fail("pipe: %s", strerror(errno));
    CALL("preadv2_nowait_empty_pipe", preadv2(p[0], &v, 1, -1, RWF_NOWAIT), -1, EAGAIN);
    CALL("preadv2_offset_pipe", preadv2(p[0], &v, 1, 0, 0), -1, ESPIPE);
    struct delayed_write dw = { p[1], 100 };
    pthread_t t = spawn(write_later, &dw);
    CALL("preadv2_empty_pipe_waits", preadv2(p[0], &v, 1, -1, 0), 1, 0);
    join(t);
    xsocketpair(sv);
    dw = (struct delayed_write){ sv[1], 100 };
    t = spawn(write_later, &dw);
    CALL("preadv2_empty_socket_waits", preadv2(sv[0], &v, 1, -1, 0), 1, 0);
    join(t);
    struct delayed d;
    /* 4 MiB into a pipe whose reader comes 100 ms later: all of it. */
    static char big[4 << 20];
    struct iovec w[2] = { { big, sizeof big / 2 }, { big + sizeof big / 2, sizeof big / 2 } };
    d = (struct delayed){ p[0], sizeof big };
    t = spawn(read_later, &d);
    CALL("pwritev2_full_pipe_waits", pwritev2(p[1], w, 2, -1, 0), (long)sizeof big, 0);
    join(t);
    line("pwritev2_reader_got", "%s", d.n == sizeof big ? "all of it" : "part of it");
    d = (struct delayed){ sv[1], sizeof big };
    t = spawn(read_later, &d);
    CALL("pwritev2_full_socket_waits", pwritev2(sv[0], w, 2, -1, 0), (long)sizeof big, 0);
    join(t);
    close(p[0]);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);
}

static const struct check checks[] = {
    { "nonblock_fcntl", check_nonblock_fcntl },
    { "nonblock_fionbio", check_nonblock_fionbio },
    { "so_rcvtimeo", check_so_rcvtimeo },
    { "close_while_blocked", check_close_while_blocked },
    { "raw_close_reuse", check_raw_close_reuse },
    { "errno_after_wait", check_errno_after_wait },
    { "shutdown_wakes", check_shutdown_wakes },
    { "bad_fds", check_bad_fds },
    { "bad_sleep", check_bad_sleep },
    { "bad_sleep_pointers", check_bad_sleep_pointers },
    { "bad_poll_select", check_bad_poll_select },
    { "bad_sockets", check_bad_sockets },
    { "socket_kinds", check_socket_kinds },
    { "rw_flags", check_rw_flags },
};

int main(int argc, char **argv)
{
    return run_checks(argc, argv, checks, sizeof checks / sizeof checks[0]);
}
