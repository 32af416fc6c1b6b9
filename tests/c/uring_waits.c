/*
 * uring_waits: waits for io_uring completions inside liburing, beside a
 * ticker. liburing makes its system calls with inline syscall
 * instructions, so no hook sees them: unhooked under the preload a fiber
 * waiting for a completion held the hub, the ticker froze, and a peer
 * fiber that would have produced the completion never ran (a hang).
 *
 * usage: uring_waits MODE
 *   wait_cqe     the main thread waits in io_uring_wait_cqe for a pipe
 *                read that a peer thread fills 200 ms later
 *   registered   wait_cqe again, on a ring whose fd is registered
 *                (io_uring_register_ring_fd: liburing enters by index)
 *   threads      three threads, a ring each, wait in io_uring_wait_cqe;
 *                the peers fill their pipes at 250, 200 and 150 ms
 *   shared       a reaper thread waits for two completions on a ring the
 *                main thread submits to later: a NOP at 100 ms, then a
 *                read filled at 200 ms
 *   submit_and_wait  io_uring_submit_and_wait(2) on two unsubmitted reads
 *                filled at 100 and 200 ms: the count submitted
 *   wait_cqes    io_uring_wait_cqes / io_uring_wait_cqe_timeout: -ETIME
 *                after the timeout, a completion before it, the kernel's
 *                reading of odd timespecs (negative, tv_nsec out of range),
 *                a bad timespec pointer (-EFAULT), two wanted and one there
 *                when the timeout passes (0, not -ETIME)
 *   submit_timeout  io_uring_submit_and_wait_timeout: the count submitted
 *                even when the wait times out, -ETIME with nothing to
 *                submit, signal masks (a bad pointer is -EFAULT only when
 *                the kernel would wait, and only if nothing was submitted)
 *   timeout_op   an IORING_OP_TIMEOUT completes the wait with -ETIME; one
 *                that expires ends a wait for two with one completion
 *   partial      an SQE the kernel rejects stops the submission short:
 *                io_uring_submit_and_wait returns without waiting
 *   misc         calls that cannot wait: -EAGAIN from the peeks, 0 from
 *                io_uring_submit_and_wait(ring, 0)
 *   eintr        no ticker. Main blocks SIGALRM (handler without
 *                SA_RESTART); thread A unblocks it and waits in
 *                io_uring_wait_cqe; setitimer fires at 100 ms: -EINTR;
 *                A waits again and gets the read filled at 300 ms. A
 *                thread that only sleeps until 150 ms wakes the hub once
 *                between the two (the portable backend, on `polling`,
 *                acts on a signal only when the hub next wakes)
 *   sqpoll       an SQPOLL ring: a wait for a read; then, its thread
 *                asleep and its queue full, io_uring_sqring_wait until a
 *                peer wakes the thread 150 ms later
 *   exit_reuse   a ring waited on and exited, then a pipe given the ring's
 *                fd number: a read on it must still wake (liburing closes
 *                the ring fd with a raw system call)
 *   passthrough  rings the shim leaves to the kernel (DEFER_TASKRUN,
 *                IOPOLL): a 100 ms timeout request, same results (the
 *                ticker is held up: not checked)
 *
 * stdout: deterministic facts only; stderr: the ticker's report
 * (ticker.h) and wait timings.
 * exit 0 on success, 1 on a failed setup.
 */
// link: -luring
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "ticker.h"

static void fail(const char *what)
{
    fprintf(stderr, "FAIL: %s\n", what);
    exit(1);
}

/* A negative errno (liburing's way) by name. */
static const char *en(int r)
{
    static char bufs[4][32];
    static int next;
    char *buf = bufs[next++ % 4];
    switch (r) {
    case -ETIME: return "-ETIME";
    case -EINTR: return "-EINTR";
    case -EFAULT: return "-EFAULT";
    case -EAGAIN: return "-EAGAIN";
    case -EINVAL: return "-EINVAL";
    case -EBADF: return "-EBADF";
    case -EOPNOTSUPP: return "-EOPNOTSUPP";
    }
    snprintf(buf, sizeof bufs[0], "%d", r);
    return buf;
}

static void ring_init(struct io_uring *ring, unsigned entries, unsigned flags)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = flags;
    p.sq_thread_idle = 10;
    int r = io_uring_queue_init_params(entries, ring, &p);
    if (r < 0) {
        fprintf(stderr, "io_uring_queue_init_params(%#x): %s\n", flags, strerror(-r));
        fail("ring setup");
    }
}

static void pipe_or_fail(int p[2])
{
    if (pipe(p) != 0)
        fail("pipe");
}

/* A peer thread writes one byte to fd after ms milliseconds. */
struct later {
    int fd;
    int ms;
};

static void *write_later(void *arg)
{
    struct later *l = arg;
    usleep(l->ms * 1000);
    if (write(l->fd, "x", 1) != 1)
        fail("peer write");
    free(l);
    return NULL;
}

static pthread_t after(int fd, int ms)
{
    struct later *l = malloc(sizeof *l);
    l->fd = fd;
    l->ms = ms;
    pthread_t t;
    if (pthread_create(&t, NULL, write_later, l) != 0)
        fail("pthread_create");
    return t;
}

static struct io_uring_sqe *sqe_of(struct io_uring *ring, __u64 ud)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe)
        fail("io_uring_get_sqe");
    io_uring_sqe_set_data64(sqe, ud);
    return sqe;
}

static char bufs[16][4];

static void read_sqe(struct io_uring *ring, int fd, __u64 ud)
{
    io_uring_prep_read(sqe_of(ring, ud), fd, bufs[ud % 16], 1, 0);
}

static void print_cqe(const char *label, struct io_uring_cqe *cqe)
{
    if (!cqe) {
        printf("%s: no cqe\n", label);
        return;
    }
    printf("%s: ud=%llu res=%s\n", label, (unsigned long long)cqe->user_data, en(cqe->res));
}

/* Prints and consumes every completion in the queue. */
static void reap(struct io_uring *ring, const char *label)
{
    struct io_uring_cqe *cqe;
    while (io_uring_peek_cqe(ring, &cqe) == 0) {
        print_cqe(label, cqe);
        io_uring_cqe_seen(ring, cqe);
    }
}

/* Whether at least min_ms passed since t0 (timing itself on stderr). */
static int waited(const char *label, long long t0, long long min_ms)
{
    long long ms = now_ms() - t0;
    fprintf(stderr, "%s.time_ms=%lld\n", label, ms);
    return ms >= min_ms;
}

static struct __kernel_timespec ms_ts(long ms)
{
    struct __kernel_timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    return ts;
}

/* ---------- modes ---------- */

static void wait_cqe_on(int registered)
{
    struct io_uring ring;
    ring_init(&ring, 8, 0);
    if (registered)
        printf("register_ring_fd=%d\n", io_uring_register_ring_fd(&ring));
    int p[2];
    pipe_or_fail(p);
    read_sqe(&ring, p[0], 1);
    printf("submit=%d\n", io_uring_submit(&ring));
    pthread_t peer = after(p[1], 200);
    long long t0 = now_ms();
    struct io_uring_cqe *cqe = NULL;
    int r = io_uring_wait_cqe(&ring, &cqe);
    int w = waited("wait_cqe", t0, 150);
    printf("wait_cqe=%s waited=%d\n", en(r), w);
    print_cqe("wait_cqe", cqe);
    printf("data=%c\n", bufs[1][0]);
    io_uring_cqe_seen(&ring, cqe);
    pthread_join(peer, NULL);
    io_uring_queue_exit(&ring);
}

static void wait_cqe(void)
{
    wait_cqe_on(0);
}

static void registered(void)
{
    wait_cqe_on(1);
}

static void *thread_waiter(void *arg)
{
    long i = (long)arg;
    struct io_uring ring;
    ring_init(&ring, 4, 0);
    int p[2];
    pipe_or_fail(p);
    static char b[3][2];
    io_uring_prep_read(sqe_of(&ring, 10 + i), p[0], b[i], 1, 0);
    io_uring_submit(&ring);
    pthread_t peer = after(p[1], 250 - 50 * (int)i);
    struct io_uring_cqe *cqe = NULL;
    long r = io_uring_wait_cqe(&ring, &cqe);
    long res = cqe ? cqe->res : 0;
    long ud = cqe ? (long)cqe->user_data : -1;
    pthread_join(peer, NULL);
    io_uring_queue_exit(&ring);
    close(p[0]);
    close(p[1]);
    return (void *)(r * 1000000 + ud * 1000 + res);
}

static void threads(void)
{
    pthread_t t[3];
    for (long i = 0; i < 3; i++)
        if (pthread_create(&t[i], NULL, thread_waiter, (void *)i) != 0)
            fail("pthread_create");
    for (int i = 0; i < 3; i++) {
        void *v;
        pthread_join(t[i], &v);
        long x = (long)v;
        printf("thread %d: ret=%ld ud=%ld res=%ld\n", i, x / 1000000, x % 1000000 / 1000, x % 1000);
    }
}

static struct io_uring shared_ring;

static void *reaper(void *arg)
{
    (void)arg;
    struct io_uring_cqe *cqe = NULL;
    long long t0 = now_ms();
    int r = io_uring_wait_cqe_nr(&shared_ring, &cqe, 2);
    int w = waited("reaper", t0, 150);
    printf("reaper: %s waited=%d ready=%u\n", en(r), w, io_uring_cq_ready(&shared_ring));
    reap(&shared_ring, "reaper");
    return NULL;
}

static void shared(void)
{
    ring_init(&shared_ring, 8, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, reaper, NULL) != 0)
        fail("pthread_create");
    int a[2];
    pipe_or_fail(a);
    usleep(100000);
    io_uring_prep_nop(sqe_of(&shared_ring, 1));
    read_sqe(&shared_ring, a[0], 2);
    pthread_t pa = after(a[1], 100);
    printf("submit=%d\n", io_uring_submit(&shared_ring));
    pthread_join(t, NULL);
    pthread_join(pa, NULL);
    io_uring_queue_exit(&shared_ring);
}

static void submit_and_wait(void)
{
    struct io_uring ring;
    ring_init(&ring, 8, 0);
    int a[2], b[2];
    pipe_or_fail(a);
    pipe_or_fail(b);
    read_sqe(&ring, a[0], 1);
    read_sqe(&ring, b[0], 2);
    pthread_t pa = after(a[1], 100), pb = after(b[1], 200);
    long long t0 = now_ms();
    int r = io_uring_submit_and_wait(&ring, 2);
    int w = waited("submit_and_wait", t0, 150);
    printf("submit_and_wait=%s waited=%d ready=%u\n", en(r), w, io_uring_cq_ready(&ring));
    reap(&ring, "submit_and_wait");
    pthread_join(pa, NULL);
    pthread_join(pb, NULL);
    io_uring_queue_exit(&ring);
}

static void wait_cqes(void)
{
    struct io_uring ring;
    ring_init(&ring, 8, 0);
    int a[2];
    pipe_or_fail(a);
    read_sqe(&ring, a[0], 1);
    io_uring_submit(&ring);
    pthread_t pa = after(a[1], 300);
    struct io_uring_cqe *cqe = NULL;

    struct __kernel_timespec ts = ms_ts(100);
    long long t0 = now_ms();
    int r = io_uring_wait_cqes(&ring, &cqe, 1, &ts, NULL);
    int w = waited("wait_cqes_timeout", t0, 90);
    printf("timed out: %s waited=%d cqe=%s\n", en(r), w, cqe ? "yes" : "null");

    ts = ms_ts(2000);
    t0 = now_ms();
    r = io_uring_wait_cqes(&ring, &cqe, 1, &ts, NULL);
    w = waited("wait_cqes_done", t0, 100);
    printf("completed: %s waited=%d\n", en(r), w);
    print_cqe("completed", cqe);
    io_uring_cqe_seen(&ring, cqe);
    pthread_join(pa, NULL);

    /* Nothing in flight: only the timeout can end these. */
    struct {
        long long sec, nsec;
        int min_ms;
    } odd[] = {{0, 0, 0}, {-1, 0, 0}, {0, -1, 0}, {-5, -5, 0}, {0, 1200000000LL, 1100}};
    for (unsigned i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        ts.tv_sec = odd[i].sec;
        ts.tv_nsec = odd[i].nsec;
        t0 = now_ms();
        r = io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
        w = waited("odd_ts", t0, odd[i].min_ms);
        printf("ts {%lld, %lld}: %s waited=%d\n", odd[i].sec, odd[i].nsec, en(r), w);
    }
    r = io_uring_wait_cqe_timeout(&ring, &cqe, (struct __kernel_timespec *)8);
    printf("bad ts pointer: %s\n", en(r));

    /* Two wanted, one there when the timeout passes: the kernel says 0. */
    io_uring_prep_nop(sqe_of(&ring, 3));
    io_uring_submit(&ring);
    ts = ms_ts(100);
    t0 = now_ms();
    r = io_uring_wait_cqes(&ring, &cqe, 2, &ts, NULL);
    w = waited("two_wanted", t0, 90);
    printf("two wanted, one there: %s waited=%d\n", en(r), w);
    print_cqe("two wanted", cqe);
    reap(&ring, "left");
    io_uring_queue_exit(&ring);
}

static void submit_timeout(void)
{
    struct io_uring ring;
    ring_init(&ring, 8, 0);
    int a[2], b[2];
    pipe_or_fail(a);
    pipe_or_fail(b);
    struct io_uring_cqe *cqe = NULL;

    /* One unsubmitted read that nobody fills yet: submitted, then timed out. */
    read_sqe(&ring, a[0], 1);
    struct __kernel_timespec ts = ms_ts(100);
    long long t0 = now_ms();
    int r = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, NULL);
    int w = waited("submitted_timed_out", t0, 90);
    printf("submitted, timed out: %s waited=%d cqe=%s\n", en(r), w, cqe ? "yes" : "null");

    t0 = now_ms();
    r = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, NULL);
    w = waited("nothing_submitted", t0, 90);
    printf("nothing to submit, timed out: %s waited=%d\n", en(r), w);

    /* An empty signal mask is a valid one. */
    sigset_t none;
    sigemptyset(&none);
    t0 = now_ms();
    r = io_uring_wait_cqes(&ring, &cqe, 1, &ts, &none);
    w = waited("empty_mask", t0, 90);
    printf("empty mask, timed out: %s waited=%d\n", en(r), w);

    /* A bad mask: the kernel reads it only when it would wait. */
    r = __io_uring_get_cqe(&ring, &cqe, 0, 1, (sigset_t *)8);
    printf("bad mask, would wait: %s\n", en(r));
    r = io_uring_wait_cqes(&ring, &cqe, 1, &ts, (sigset_t *)8);
    printf("bad mask with a timeout, would wait: %s\n", en(r));
    read_sqe(&ring, b[0], 2);
    r = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, (sigset_t *)8);
    printf("bad mask, one submitted: %s cqe=%s\n", en(r), cqe ? "yes" : "null");

    /* A NOP submitted and waited for, no timeout. */
    io_uring_prep_nop(sqe_of(&ring, 3));
    r = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, NULL, NULL);
    printf("nop: %s\n", en(r));
    print_cqe("nop", cqe);
    io_uring_cqe_seen(&ring, cqe);

    /* The reads end when the peers write. */
    pthread_t pa = after(a[1], 100), pb = after(b[1], 150);
    ts = ms_ts(5000);
    t0 = now_ms();
    r = io_uring_submit_and_wait_timeout(&ring, &cqe, 2, &ts, NULL);
    w = waited("both_reads", t0, 120);
    printf("both reads: %s waited=%d ready=%u\n", en(r), w, io_uring_cq_ready(&ring));
    reap(&ring, "reads");
    pthread_join(pa, NULL);
    pthread_join(pb, NULL);
    io_uring_queue_exit(&ring);
}

static void timeout_op(void)
{
    struct io_uring ring;
    ring_init(&ring, 8, 0);
    struct __kernel_timespec t150 = ms_ts(150), t100 = ms_ts(100);
    io_uring_prep_timeout(sqe_of(&ring, 7), &t150, 0, 0);
    long long t0 = now_ms();
    int r = io_uring_submit_and_wait(&ring, 1);
    int w = waited("timeout_op", t0, 140);
    printf("timeout request: %s waited=%d\n", en(r), w);
    reap(&ring, "timeout request");

    /* Waiting for two: an expired timeout request ends the wait at once. */
    int a[2];
    pipe_or_fail(a);
    read_sqe(&ring, a[0], 8);
    io_uring_prep_timeout(sqe_of(&ring, 9), &t100, 0, 0);
    pthread_t pa = after(a[1], 400);
    t0 = now_ms();
    r = io_uring_submit_and_wait(&ring, 2);
    long long ms = now_ms() - t0;
    fprintf(stderr, "timeout_wakes.time_ms=%lld\n", ms);
    printf("two wanted, timeout expired: %s ready=%u early=%d\n", en(r), io_uring_cq_ready(&ring), ms < 350);
    reap(&ring, "early");
    struct io_uring_cqe *cqe = NULL;
    r = io_uring_wait_cqe(&ring, &cqe);
    printf("then the read: %s\n", en(r));
    print_cqe("then the read", cqe);
    io_uring_cqe_seen(&ring, cqe);
    pthread_join(pa, NULL);
    io_uring_queue_exit(&ring);
}

static void partial(void)
{
    struct io_uring ring;
    ring_init(&ring, 8, 0);
    struct io_uring_sqe *bad = sqe_of(&ring, 1);
    io_uring_prep_nop(bad);
    bad->opcode = 0xfe; /* no such operation */
    io_uring_prep_nop(sqe_of(&ring, 2));
    int r = io_uring_submit_and_wait(&ring, 2);
    printf("bad sqe first: %s ready=%u\n", en(r), io_uring_cq_ready(&ring));
    reap(&ring, "bad sqe first");
    r = io_uring_submit_and_wait(&ring, 1);
    printf("the rest: %s ready=%u\n", en(r), io_uring_cq_ready(&ring));
    reap(&ring, "the rest");
    io_uring_queue_exit(&ring);
}

static void misc(void)
{
    struct io_uring ring;
    ring_init(&ring, 8, 0);
    struct io_uring_cqe *cqe = NULL;
    printf("peek, empty: %s\n", en(io_uring_peek_cqe(&ring, &cqe)));
    printf("get_cqe(0, 0), empty: %s\n", en(__io_uring_get_cqe(&ring, &cqe, 0, 0, NULL)));
    printf("wait_cqe_nr(0), empty: %s\n", en(io_uring_wait_cqe_nr(&ring, &cqe, 0)));
    printf("submit_and_wait(0), empty: %s\n", en(io_uring_submit_and_wait(&ring, 0)));
    io_uring_prep_nop(sqe_of(&ring, 1));
    io_uring_prep_nop(sqe_of(&ring, 2));
    printf("submit_and_wait(1), two nops: %s\n", en(io_uring_submit_and_wait(&ring, 1)));
    printf("wait_cqe_nr(2): %s\n", en(io_uring_wait_cqe_nr(&ring, &cqe, 2)));
    reap(&ring, "nops");
    io_uring_queue_exit(&ring);
}

static void on_alarm(int sig)
{
    (void)sig;
}

static int eintr_pipe[2];

static void *eintr_waiter(void *arg)
{
    (void)arg;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    struct io_uring ring;
    ring_init(&ring, 4, 0);
    read_sqe(&ring, eintr_pipe[0], 1);
    io_uring_submit(&ring);
    struct io_uring_cqe *cqe = NULL;
    long long t0 = now_ms();
    int r = io_uring_wait_cqe(&ring, &cqe);
    int w = waited("eintr", t0, 80);
    printf("interrupted: %s waited=%d cqe=%s\n", en(r), w, cqe ? "yes" : "null");
    r = io_uring_wait_cqe(&ring, &cqe);
    printf("again: %s\n", en(r));
    print_cqe("again", cqe);
    io_uring_cqe_seen(&ring, cqe);
    io_uring_queue_exit(&ring);
    return NULL;
}

static void *sleep_150ms(void *arg)
{
    (void)arg;
    usleep(150000);
    return NULL;
}

static void eintr(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    pipe_or_fail(eintr_pipe);
    pthread_t a;
    if (pthread_create(&a, NULL, eintr_waiter, NULL) != 0)
        fail("pthread_create");
    pthread_t peer = after(eintr_pipe[1], 300);
    pthread_t nudge;
    if (pthread_create(&nudge, NULL, sleep_150ms, NULL) != 0)
        fail("pthread_create");
    struct itimerval it = {.it_value = {.tv_sec = 0, .tv_usec = 100000}};
    setitimer(ITIMER_REAL, &it, NULL);
    pthread_join(a, NULL);
    pthread_join(peer, NULL);
    pthread_join(nudge, NULL);
}

static struct io_uring sq_ring;

static void *wake_sq_thread(void *arg)
{
    (void)arg;
    usleep(150000);
    if (io_uring_enter(sq_ring.ring_fd, 0, 0, IORING_ENTER_SQ_WAKEUP, NULL) < 0)
        fail("io_uring_enter(SQ_WAKEUP)");
    return NULL;
}

static void sqpoll(void)
{
    ring_init(&sq_ring, 4, IORING_SETUP_SQPOLL);
    int a[2];
    pipe_or_fail(a);
    read_sqe(&sq_ring, a[0], 1);
    printf("submit=%d\n", io_uring_submit(&sq_ring));
    pthread_t pa = after(a[1], 150);
    struct io_uring_cqe *cqe = NULL;
    long long t0 = now_ms();
    int r = io_uring_wait_cqe(&sq_ring, &cqe);
    int w = waited("sqpoll_wait", t0, 100);
    printf("wait_cqe=%s waited=%d\n", en(r), w);
    print_cqe("sqpoll", cqe);
    io_uring_cqe_seen(&sq_ring, cqe);
    pthread_join(pa, NULL);

    /* Let the SQ thread fall asleep (idle 10 ms), then fill the queue
     * behind its back: nobody wakes it but the peer. */
    for (int i = 0; i < 200 && !(IO_URING_READ_ONCE(*sq_ring.sq.kflags) & IORING_SQ_NEED_WAKEUP); i++)
        usleep(10000);
    usleep(50000);
    if (!(IO_URING_READ_ONCE(*sq_ring.sq.kflags) & IORING_SQ_NEED_WAKEUP))
        fail("the SQPOLL thread did not go to sleep");
    for (int i = 0; i < 4; i++)
        io_uring_prep_nop(sqe_of(&sq_ring, 20 + i));
    sq_ring.sq.sqe_head = sq_ring.sq.sqe_tail;
    io_uring_smp_store_release(sq_ring.sq.ktail, sq_ring.sq.sqe_tail);
    printf("space left=%u\n", io_uring_sq_space_left(&sq_ring));
    pthread_t waker;
    if (pthread_create(&waker, NULL, wake_sq_thread, NULL) != 0)
        fail("pthread_create");
    t0 = now_ms();
    r = io_uring_sqring_wait(&sq_ring);
    w = waited("sqring_wait", t0, 100);
    printf("sqring_wait=%s waited=%d\n", en(r), w);
    r = io_uring_wait_cqe_nr(&sq_ring, &cqe, 4);
    printf("wait_cqe_nr(4)=%s ready=%u\n", en(r), io_uring_cq_ready(&sq_ring));
    reap(&sq_ring, "nops");
    pthread_join(waker, NULL);
    io_uring_queue_exit(&sq_ring);
}

static void exit_reuse(void)
{
    struct io_uring ring;
    ring_init(&ring, 4, 0);
    int ring_fd = ring.ring_fd;
    int a[2];
    pipe_or_fail(a);
    read_sqe(&ring, a[0], 1);
    io_uring_submit(&ring);
    pthread_t pa = after(a[1], 100);
    struct io_uring_cqe *cqe = NULL;
    int r = io_uring_wait_cqe(&ring, &cqe);
    printf("wait_cqe=%s\n", en(r));
    print_cqe("before exit", cqe);
    io_uring_cqe_seen(&ring, cqe);
    pthread_join(pa, NULL);
    io_uring_queue_exit(&ring);

    /* The lowest free number: the ring's. */
    int b[2];
    pipe_or_fail(b);
    printf("number reused=%d\n", b[0] == ring_fd);
    pthread_t pb = after(b[1], 100);
    char c;
    long long t0 = now_ms();
    ssize_t n = read(b[0], &c, 1);
    int w = waited("reused_read", t0, 80);
    printf("read on the reused number: %zd waited=%d\n", n, w);
    pthread_join(pb, NULL);
}

static void passthrough_one(const char *name, unsigned flags)
{
    struct io_uring ring;
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = flags;
    int r = io_uring_queue_init_params(4, &ring, &p);
    if (r < 0) {
        printf("%s: setup %s\n", name, en(r));
        return;
    }
    struct __kernel_timespec t100 = ms_ts(100);
    io_uring_prep_timeout(sqe_of(&ring, 1), &t100, 0, 0);
    long long t0 = now_ms();
    r = io_uring_submit_and_wait(&ring, 1);
    struct io_uring_cqe *cqe = NULL;
    int r2 = io_uring_wait_cqe(&ring, &cqe);
    int w = waited(name, t0, 90);
    printf("%s: submit_and_wait=%s wait_cqe=%s waited=%d\n", name, en(r), en(r2), r2 == 0 ? w : 1);
    print_cqe(name, r2 == 0 ? cqe : NULL);
    if (r2 == 0)
        io_uring_cqe_seen(&ring, cqe);
    io_uring_queue_exit(&ring);
}

static void passthrough(void)
{
    passthrough_one("defer_taskrun", IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
    passthrough_one("iopoll", IORING_SETUP_IOPOLL);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 2) {
        fprintf(stderr, "usage: uring_waits MODE\n");
        return 2;
    }
    const char *mode = argv[1];
    static const struct {
        const char *name;
        void (*run)(void);
    } modes[] = {
        {"wait_cqe", wait_cqe},
        {"registered", registered},
        {"threads", threads},
        {"shared", shared},
        {"submit_and_wait", submit_and_wait},
        {"wait_cqes", wait_cqes},
        {"submit_timeout", submit_timeout},
        {"timeout_op", timeout_op},
        {"partial", partial},
        {"misc", misc},
        {"sqpoll", sqpoll},
        {"exit_reuse", exit_reuse},
        {"passthrough", passthrough},
    };
    if (!strcmp(mode, "eintr")) {
        eintr();
        return 0;
    }
    for (unsigned i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (!strcmp(mode, modes[i].name)) {
            pthread_t t = ticker_start();
            modes[i].run();
            ticker_stop(t);
            return 0;
        }
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
