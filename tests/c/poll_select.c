/*
 * poll_select: readiness waits between threads on pipes (and an eventfd and
 * a timerfd): poll, ppoll, select, pselect, epoll_wait, epoll_pwait,
 * epoll_pwait2. Checks what comes back (return counts, revents, fd_set
 * contents, epoll events and data, what happens to the timeout argument)
 * and that timeouts are honoured.
 *
 * usage: poll_select [CHECK...]
 *   no arguments runs every check; otherwise only the named ones.
 *
 * stdout: one line per check, "name: <facts>", deterministic.
 * stderr: "<name>.time_ms=<n>" for each wait, "time_ms=<total>".
 * A wrong result: "FAIL <name>: ..." on stderr, exit 1. alarm(20) turns a
 * hang into a death by SIGALRM.
 *
 * "wake" checks block with an infinite (or long) timeout while another
 * thread writes 50 ms later; "timeout" checks wait 100 ms on an fd that
 * never becomes ready and must return 0 after at least 100 ms.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

/* ---------- helpers ---------- */

static void timing(const char *suffix, long long ms)
{
    fprintf(stderr, "%s%s%s.time_ms=%lld\n", g_check, *suffix ? "_" : "", suffix, ms);
}

/* poll revents as names; buf must hold 96 bytes */
static const char *ev_str(char *buf, int ev)
{
    static const struct {
        int bit;
        const char *name;
    } bits[] = { { POLLIN, "IN" },   { POLLPRI, "PRI" },   { POLLOUT, "OUT" },         { POLLERR, "ERR" },
                 { POLLHUP, "HUP" }, { POLLNVAL, "NVAL" }, { POLLRDNORM, "RDNORM" }, { POLLWRNORM, "WRNORM" },
                 { POLLRDHUP, "RDHUP" } };
    if (ev == 0)
        return strcpy(buf, "0");
    buf[0] = 0;
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
        if (ev & bits[i].bit) {
            if (buf[0])
                strcat(buf, "|");
            strcat(buf, bits[i].name);
            ev &= ~bits[i].bit;
        }
    }
    if (ev)
        sprintf(buf + strlen(buf), "|%#x", ev);
    return buf;
}

static void xpipe(int p[2])
{
    if (pipe(p) != 0)
        fail("pipe: %s", strerror(errno));
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

static pthread_t write_after(struct delayed_write *d, int fd, long ms)
{
    d->fd = fd;
    d->ms = ms;
    return spawn(write_later, d);
}

static void drain(int fd)
{
    char buf[64];
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    while (read(fd, buf, sizeof buf) > 0)
        ;
    fcntl(fd, F_SETFL, fl);
}

static void expect_wait_ms(const char *what, long long ms, long long min)
{
    timing(what, ms);
    if (ms < min)
        fail("%s returned after %lld ms, before %lld ms", what, ms, min);
}

/* ---------- poll / ppoll ---------- */

static void check_poll_wake(void)
{
    int a[2], b[2];
    xpipe(a);
    xpipe(b);
    struct delayed_write d;
    pthread_t t = write_after(&d, a[1], 50);
    struct pollfd pf[2] = { { a[0], POLLIN, 0 }, { b[0], POLLIN, 0 } };
    long long t0 = now_ms();
    int r = poll(pf, 2, -1);
    expect_wait_ms("", now_ms() - t0, 40);
    join(t);
    char s0[96], s1[96];
    result("ret=%d revents_a=%s revents_b=%s", r, ev_str(s0, pf[0].revents), ev_str(s1, pf[1].revents));
    if (r != 1 || pf[0].revents != POLLIN || pf[1].revents != 0)
        fail("unexpected poll result");
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
}

static void check_poll_timeout(void)
{
    int a[2];
    xpipe(a);
    struct pollfd pf = { a[0], POLLIN, 0x7 /* must be overwritten */ };
    long long t0 = now_ms();
    int r = poll(&pf, 1, 100);
    expect_wait_ms("", now_ms() - t0, 100);
    t0 = now_ms();
    int r0 = poll(&pf, 1, 0);
    timing("zero", now_ms() - t0);
    /* no fds at all: poll is a sleep */
    t0 = now_ms();
    int rn = poll(NULL, 0, 100);
    expect_wait_ms("nfds0", now_ms() - t0, 100);
    char s[96];
    result("ret=%d revents=%s zero_timeout_ret=%d nfds0_ret=%d", r, ev_str(s, pf.revents), r0, rn);
    if (r != 0 || pf.revents != 0 || r0 != 0 || rn != 0)
        fail("unexpected poll timeout result");
    close(a[0]);
    close(a[1]);
}

static void check_poll_hup(void)
{
    int a[2];
    xpipe(a);
    struct pollfd pw = { a[1], POLLOUT | POLLIN, 0 };
    int rw = poll(&pw, 1, 0);
    if (write(a[1], "x", 1) != 1)
        fail("write");
    close(a[1]);
    struct pollfd pr = { a[0], POLLIN, 0 };
    int r1 = poll(&pr, 1, -1);
    int ev1 = pr.revents;
    drain(a[0]);
    int r2 = poll(&pr, 1, -1);
    int ev2 = pr.revents;
    char s0[96], s1[96], s2[96];
    result("write_end ret=%d revents=%s; data+closed ret=%d revents=%s; empty+closed ret=%d revents=%s", rw,
           ev_str(s0, pw.revents), r1, ev_str(s1, ev1), r2, ev_str(s2, ev2));
    if (pw.revents != POLLOUT || ev1 != (POLLIN | POLLHUP) || ev2 != POLLHUP)
        fail("unexpected revents");
    close(a[0]);

    /* the read end gone: the write end reports POLLERR */
    xpipe(a);
    close(a[0]);
    struct pollfd pe = { a[1], POLLOUT, 0 };
    int r3 = poll(&pe, 1, -1);
    printf("poll_reader_gone: ret=%d revents=%s\n", r3, ev_str(s0, pe.revents));
    fflush(stdout);
    if (r3 != 1 || !(pe.revents & POLLERR))
        fail("no POLLERR when the reader is gone");
    close(a[1]);
}

struct poll_waiter {
    int fd;
    int ret;
    short revents;
};

static void *poll_waiter(void *arg)
{
    struct poll_waiter *w = arg;
    struct pollfd pf = { w->fd, POLLIN, 0 };
    w->ret = poll(&pf, 1, -1);
    w->revents = pf.revents;
    return NULL;
}

static void check_poll_two_waiters(void)
{
    int a[2];
    xpipe(a);
    struct poll_waiter w1 = { a[0], -2, 0 }, w2 = { a[0], -2, 0 };
    pthread_t t1 = spawn(poll_waiter, &w1), t2 = spawn(poll_waiter, &w2);
    usleep(50000);
    long long t0 = now_ms();
    if (write(a[1], "x", 1) != 1)
        fail("write");
    join(t1);
    join(t2);
    timing("", now_ms() - t0);
    int woke = (w1.ret == 1 && w1.revents == POLLIN) + (w2.ret == 1 && w2.revents == POLLIN);
    result("woke=%d", woke);
    if (woke != 2)
        fail("only %d of 2 pollers saw POLLIN", woke);
    close(a[0]);
    close(a[1]);
}

static void check_ppoll(void)
{
    int a[2];
    xpipe(a);
    struct delayed_write d;
    pthread_t t = write_after(&d, a[1], 50);
    struct pollfd pf = { a[0], POLLIN, 0 };
    long long t0 = now_ms();
    int r1 = ppoll(&pf, 1, NULL, NULL);
    expect_wait_ms("wake", now_ms() - t0, 40);
    join(t);
    int ev1 = pf.revents;
    drain(a[0]);

    struct timespec ts = { 0, 100000000L };
    sigset_t mask;
    sigemptyset(&mask);
    t0 = now_ms();
    int r2 = ppoll(&pf, 1, &ts, &mask);
    expect_wait_ms("timeout", now_ms() - t0, 100);

    t = write_after(&d, a[1], 50);
    struct timespec ts2 = { 5, 0 };
    t0 = now_ms();
    int r3 = ppoll(&pf, 1, &ts2, NULL);
    expect_wait_ms("wake_with_timeout", now_ms() - t0, 40);
    join(t);
    char s[96];
    /* glibc's ppoll passes a copy: the caller's timespec is left as it was */
    result("wake_ret=%d revents=%s timeout_ret=%d ts_after=%ld.%09ld wake_with_timeout_ret=%d ts2_after=%ld.%09ld",
           r1, ev_str(s, ev1), r2, (long)ts.tv_sec, ts.tv_nsec, r3, (long)ts2.tv_sec, ts2.tv_nsec);
    if (r1 != 1 || ev1 != POLLIN || r2 != 0 || r3 != 1)
        fail("unexpected ppoll result");
    close(a[0]);
    close(a[1]);
}

/* ---------- select / pselect ---------- */

static int count_set(fd_set *s, int nfds)
{
    int n = 0;
    for (int i = 0; i < nfds; i++)
        n += FD_ISSET(i, s) ? 1 : 0;
    return n;
}

static void check_select_wake(void)
{
    int a[2], b[2];
    xpipe(a);
    xpipe(b);
    struct delayed_write d;
    pthread_t t = write_after(&d, b[1], 50);
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(a[0], &rs);
    FD_SET(b[0], &rs);
    int nfds = (a[0] > b[0] ? a[0] : b[0]) + 1;
    struct timeval tv = { 2, 0 };
    long long t0 = now_ms();
    int r = select(nfds, &rs, NULL, NULL, &tv);
    expect_wait_ms("", now_ms() - t0, 40);
    join(t);
    /* Linux writes the time not slept back into the timeval */
    int decreased = tv.tv_sec < 2 && (tv.tv_sec > 0 || tv.tv_usec > 0);
    result("ret=%d a_set=%d b_set=%d bits_set=%d timeout_decreased=%s", r, FD_ISSET(a[0], &rs) ? 1 : 0,
           FD_ISSET(b[0], &rs) ? 1 : 0, count_set(&rs, nfds), decreased ? "yes" : "no");
    if (r != 1 || FD_ISSET(a[0], &rs) || !FD_ISSET(b[0], &rs) || !decreased)
        fail("unexpected select result (tv after = %ld.%06ld)", (long)tv.tv_sec, (long)tv.tv_usec);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
}

static void check_select_timeout(void)
{
    int a[2];
    xpipe(a);
    fd_set rs, ws;
    FD_ZERO(&rs);
    FD_SET(a[0], &rs);
    struct timeval tv = { 0, 100000 };
    long long t0 = now_ms();
    int r = select(a[0] + 1, &rs, NULL, NULL, &tv);
    expect_wait_ms("", now_ms() - t0, 100);
    int bits = count_set(&rs, a[0] + 1);

    /* select with no fds as a sleep */
    struct timeval tv2 = { 0, 100000 };
    t0 = now_ms();
    int r2 = select(0, NULL, NULL, NULL, &tv2);
    expect_wait_ms("no_fds", now_ms() - t0, 100);

    /* a writable pipe is reported at once, the read side stays clear */
    FD_ZERO(&rs);
    FD_ZERO(&ws);
    FD_SET(a[0], &rs);
    FD_SET(a[1], &ws);
    int nfds = (a[0] > a[1] ? a[0] : a[1]) + 1;
    struct timeval tv3 = { 1, 0 };
    int r3 = select(nfds, &rs, &ws, NULL, &tv3);
    result("ret=%d bits_set=%d tv_after=%ld.%06ld no_fds_ret=%d tv2_after=%ld.%06ld writable_ret=%d w_set=%d r_set=%d",
           r, bits, (long)tv.tv_sec, (long)tv.tv_usec, r2, (long)tv2.tv_sec, (long)tv2.tv_usec, r3,
           FD_ISSET(a[1], &ws) ? 1 : 0, FD_ISSET(a[0], &rs) ? 1 : 0);
    if (r != 0 || bits != 0 || tv.tv_sec != 0 || tv.tv_usec != 0 || r2 != 0 || r3 != 1 || !FD_ISSET(a[1], &ws) ||
        FD_ISSET(a[0], &rs))
        fail("unexpected select result");
    close(a[0]);
    close(a[1]);
}

static void check_pselect(void)
{
    int a[2];
    xpipe(a);
    struct delayed_write d;
    pthread_t t = write_after(&d, a[1], 50);
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(a[0], &rs);
    long long t0 = now_ms();
    int r1 = pselect(a[0] + 1, &rs, NULL, NULL, NULL, NULL);
    expect_wait_ms("wake", now_ms() - t0, 40);
    join(t);
    int set1 = FD_ISSET(a[0], &rs) ? 1 : 0;
    drain(a[0]);

    FD_ZERO(&rs);
    FD_SET(a[0], &rs);
    struct timespec ts = { 0, 100000000L };
    sigset_t mask;
    sigemptyset(&mask);
    t0 = now_ms();
    int r2 = pselect(a[0] + 1, &rs, NULL, NULL, &ts, &mask);
    expect_wait_ms("timeout", now_ms() - t0, 100);
    /* glibc's pselect does not write the remaining time back */
    result("wake_ret=%d set=%d timeout_ret=%d bits_set=%d ts_after=%ld.%09ld", r1, set1, r2,
           count_set(&rs, a[0] + 1), (long)ts.tv_sec, ts.tv_nsec);
    if (r1 != 1 || !set1 || r2 != 0 || count_set(&rs, a[0] + 1) != 0)
        fail("unexpected pselect result");
    close(a[0]);
    close(a[1]);
}

/* ---------- epoll ---------- */

static void ep_add(int ep, int fd, uint32_t events, uint64_t id)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.u64 = id;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        fail("epoll_ctl ADD: %s", strerror(errno));
}

static void check_epoll_wait(void)
{
    int a[2], b[2];
    xpipe(a);
    xpipe(b);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    ep_add(ep, a[0], EPOLLIN, 1);
    ep_add(ep, b[0], EPOLLIN, 2);
    struct epoll_event evs[8];
    struct delayed_write d;
    pthread_t t = write_after(&d, b[1], 50);
    long long t0 = now_ms();
    int r1 = epoll_wait(ep, evs, 8, -1);
    expect_wait_ms("wake", now_ms() - t0, 40);
    join(t);
    uint64_t id = r1 == 1 ? evs[0].data.u64 : 0;
    uint32_t events = r1 == 1 ? evs[0].events : 0;
    drain(b[0]);

    t0 = now_ms();
    int r2 = epoll_wait(ep, evs, 8, 100);
    expect_wait_ms("timeout", now_ms() - t0, 100);
    t0 = now_ms();
    int r3 = epoll_wait(ep, evs, 8, 0);
    timing("zero", now_ms() - t0);
    result("wake_ret=%d id=%llu events=%#x timeout_ret=%d zero_ret=%d", r1, (unsigned long long)id, events, r2, r3);
    if (r1 != 1 || id != 2 || events != EPOLLIN || r2 != 0 || r3 != 0)
        fail("unexpected epoll_wait result");
    close(ep);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
}

static void check_epoll_pwait(void)
{
    int a[2];
    xpipe(a);
    int ep = epoll_create1(0);
    ep_add(ep, a[0], EPOLLIN, 7);
    struct epoll_event evs[4];
    sigset_t mask;
    sigemptyset(&mask);
    struct delayed_write d;
    pthread_t t = write_after(&d, a[1], 50);
    long long t0 = now_ms();
    int r1 = epoll_pwait(ep, evs, 4, -1, &mask);
    expect_wait_ms("wake", now_ms() - t0, 40);
    join(t);
    uint64_t id = r1 == 1 ? evs[0].data.u64 : 0;
    drain(a[0]);
    t0 = now_ms();
    int r2 = epoll_pwait(ep, evs, 4, 100, NULL);
    expect_wait_ms("timeout", now_ms() - t0, 100);

    struct timespec ts = { 0, 100000000L };
    t0 = now_ms();
    errno = 0;
    int r3 = epoll_pwait2(ep, evs, 4, &ts, NULL);
    int e3 = errno;
    expect_wait_ms("pwait2_timeout", now_ms() - t0, 100);
    t = write_after(&d, a[1], 50);
    struct timespec ts2 = { 5, 0 };
    t0 = now_ms();
    int r4 = epoll_pwait2(ep, evs, 4, &ts2, &mask);
    expect_wait_ms("pwait2_wake", now_ms() - t0, 40);
    join(t);
    result("wake_ret=%d id=%llu timeout_ret=%d pwait2_timeout_ret=%d errno=%s pwait2_wake_ret=%d", r1,
           (unsigned long long)id, r2, r3, en(r3 < 0 ? e3 : 0), r4);
    if (r1 != 1 || id != 7 || r2 != 0 || r3 != 0 || r4 != 1)
        fail("unexpected epoll_pwait result");
    close(ep);
    close(a[0]);
    close(a[1]);
}

static void check_epoll_modes(void)
{
    int lt[2], et[2], os[2];
    xpipe(lt);
    xpipe(et);
    xpipe(os);
    int ep = epoll_create1(0);
    ep_add(ep, lt[0], EPOLLIN, 1);
    ep_add(ep, et[0], EPOLLIN | EPOLLET, 2);
    ep_add(ep, os[0], EPOLLIN | EPOLLONESHOT, 3);
    if (write(lt[1], "x", 1) != 1 || write(et[1], "x", 1) != 1 || write(os[1], "x", 1) != 1)
        fail("write");
    struct epoll_event evs[8];
    int r1 = epoll_wait(ep, evs, 8, 0);
    uint64_t mask1 = 0;
    for (int i = 0; i < r1; i++)
        mask1 |= 1ULL << evs[i].data.u64;
    /* nothing read: level-triggered reports again, edge and oneshot do not */
    int r2 = epoll_wait(ep, evs, 8, 0);
    uint64_t mask2 = 0;
    for (int i = 0; i < r2; i++)
        mask2 |= 1ULL << evs[i].data.u64;
    /* new data: edge-triggered fires again, oneshot stays disarmed */
    if (write(et[1], "y", 1) != 1 || write(os[1], "y", 1) != 1)
        fail("write");
    int r3 = epoll_wait(ep, evs, 8, 0);
    uint64_t mask3 = 0;
    for (int i = 0; i < r3; i++)
        mask3 |= 1ULL << evs[i].data.u64;
    /* re-arm the oneshot fd */
    struct epoll_event ev = { EPOLLIN | EPOLLONESHOT, { .u64 = 3 } };
    epoll_ctl(ep, EPOLL_CTL_MOD, os[0], &ev);
    int r4 = epoll_wait(ep, evs, 8, 0);
    uint64_t mask4 = 0;
    for (int i = 0; i < r4; i++)
        mask4 |= 1ULL << evs[i].data.u64;
    /* ids as bits: 1=level 2=edge 3=oneshot */
    result("first=%d/%#llx again=%d/%#llx after_new_data=%d/%#llx after_rearm=%d/%#llx", r1,
           (unsigned long long)mask1, r2, (unsigned long long)mask2, r3, (unsigned long long)mask3, r4,
           (unsigned long long)mask4);
    if (mask1 != 0xe || mask2 != 0x2 || mask3 != 0x6 || mask4 != 0xa)
        fail("unexpected epoll trigger behaviour");
    close(ep);
    close(lt[0]);
    close(lt[1]);
    close(et[0]);
    close(et[1]);
    close(os[0]);
    close(os[1]);
}

struct ep_waiter {
    int ep;
    int ret;
    uint64_t id;
    volatile int started;
};

static void *ep_waiter(void *arg)
{
    struct ep_waiter *w = arg;
    struct epoll_event ev;
    w->started = 1;
    w->ret = epoll_wait(w->ep, &ev, 1, 10000);
    w->id = w->ret == 1 ? ev.data.u64 : 0;
    return NULL;
}

/* epoll_ctl(ADD) of a ready fd wakes a thread already blocked in epoll_wait */
static void check_epoll_add_while_waiting(void)
{
    int a[2];
    xpipe(a);
    int ep = epoll_create1(0);
    struct ep_waiter w = { ep, -2, 0, 0 };
    pthread_t t = spawn(ep_waiter, &w);
    while (!w.started)
        usleep(1000);
    usleep(50000);
    if (write(a[1], "x", 1) != 1)
        fail("write");
    long long t0 = now_ms();
    ep_add(ep, a[0], EPOLLIN, 42);
    join(t);
    timing("", now_ms() - t0);
    result("ret=%d id=%llu", w.ret, (unsigned long long)w.id);
    if (w.ret != 1 || w.id != 42)
        fail("blocked epoll_wait did not see the added fd");
    close(ep);
    close(a[0]);
    close(a[1]);
}

/* an epoll fd is itself pollable: POLLIN while it has ready events */
static void check_poll_on_epoll_fd(void)
{
    int a[2];
    xpipe(a);
    int ep = epoll_create1(0);
    ep_add(ep, a[0], EPOLLIN, 1);
    struct pollfd pf = { ep, POLLIN, 0 };
    int r0 = poll(&pf, 1, 0);
    struct delayed_write d;
    pthread_t t = write_after(&d, a[1], 50);
    long long t0 = now_ms();
    int r1 = poll(&pf, 1, -1);
    expect_wait_ms("", now_ms() - t0, 40);
    join(t);
    char s[96];
    result("before=%d after_write=%d revents=%s", r0, r1, ev_str(s, pf.revents));
    if (r0 != 0 || r1 != 1 || pf.revents != POLLIN)
        fail("unexpected poll on epoll fd");
    close(ep);
    close(a[0]);
    close(a[1]);
}

/* ---------- eventfd / timerfd blocking reads ---------- */

static void *eventfd_add_later(void *arg)
{
    int fd = (int)(long)arg;
    usleep(50000);
    uint64_t v = 5;
    if (write(fd, &v, sizeof v) != sizeof v)
        fail("eventfd write: %s", strerror(errno));
    return NULL;
}

static void check_eventfd_read(void)
{
    int fd = eventfd(0, 0);
    pthread_t t = spawn(eventfd_add_later, (void *)(long)fd);
    uint64_t v = 0;
    long long t0 = now_ms();
    ssize_t n = read(fd, &v, sizeof v);
    expect_wait_ms("", now_ms() - t0, 40);
    join(t);
    uint64_t v1 = v;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    errno = 0;
    ssize_t n2 = read(fd, &v, sizeof v);
    int e2 = errno;
    fcntl(fd, F_SETFL, 0);
    result("ret=%zd value=%llu empty_nonblock_ret=%zd errno=%s", n, (unsigned long long)v1, n2, en(e2));
    if (n != 8 || v1 != 5 || n2 != -1 || e2 != EAGAIN)
        fail("unexpected eventfd result");
    close(fd);
}

static void check_timerfd_read(void)
{
    int fd = timerfd_create(CLOCK_MONOTONIC, 0);
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_nsec = 100000000L;
    long long t0 = now_ms();
    timerfd_settime(fd, 0, &its, NULL);
    uint64_t exp = 0;
    ssize_t n = read(fd, &exp, sizeof exp);
    expect_wait_ms("", now_ms() - t0, 100);
    result("ret=%zd expirations=%llu", n, (unsigned long long)exp);
    if (n != 8 || exp != 1)
        fail("unexpected timerfd read");
    close(fd);
}

/* ---------- driver ---------- */

static const struct check checks[] = {
    { "poll_wake", check_poll_wake },
    { "poll_timeout", check_poll_timeout },
    { "poll_hup", check_poll_hup },
    { "poll_two_waiters", check_poll_two_waiters },
    { "ppoll", check_ppoll },
    { "select_wake", check_select_wake },
    { "select_timeout", check_select_timeout },
    { "pselect", check_pselect },
    { "epoll_wait", check_epoll_wait },
    { "epoll_pwait", check_epoll_pwait },
    { "epoll_modes", check_epoll_modes },
    { "epoll_add_while_waiting", check_epoll_add_while_waiting },
    { "poll_on_epoll_fd", check_poll_on_epoll_fd },
    { "eventfd_read", check_eventfd_read },
    { "timerfd_read", check_timerfd_read },
};

int main(int argc, char **argv)
{
    return run_checks(argc, argv, checks, sizeof checks / sizeof checks[0]);
}
