/*
 * notify_threads: notifications glibc runs on threads of its own
 * (SIGEV_THREAD), and POSIX AIO, whose requests glibc's own threads carry
 * out, compared with glibc. A ticker counts 10 ms ticks during each wait.
 *
 *   a SIGEV_THREAD timer every 50 ms whose function signals a condition
 *   variable a thread waits on (the process exited with the deadlock
 *   report before the timer first fired)
 *   an mq_notify SIGEV_THREAD function signalling a waiting thread when
 *   another thread sends 100 ms later
 *   aio_read of an empty pipe that another thread writes 100 ms later,
 *   waited for with aio_suspend: the data (EAGAIN, before: the pipe is
 *   non-blocking underneath), and the ticker ticked (aio_suspend held
 *   the hub); aio_suspend with a zero timeout while it is pending: EAGAIN
 *   lio_listio(LIO_WAIT) of a read of an empty pipe written 100 ms later
 *
 * usage: notify_threads
 * stdout: one line per case.
 */
#define _GNU_SOURCE
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ticker.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int fired;

static void notify(union sigval v)
{
    (void)v;
    pthread_mutex_lock(&m);
    fired++;
    pthread_cond_signal(&c);
    pthread_mutex_unlock(&m);
}

static void wait_for(int n)
{
    pthread_mutex_lock(&m);
    while (fired < n)
        pthread_cond_wait(&c, &m);
    pthread_mutex_unlock(&m);
}

static void *waiter(void *arg)
{
    wait_for((int)(long)arg);
    return NULL;
}

static int p[2];
static mqd_t q;

static void *late_write(void *arg)
{
    usleep(100000);
    if (write(p[1], arg, strlen(arg)) < 0)
        perror("write");
    return NULL;
}

static void *late_send(void *arg)
{
    (void)arg;
    usleep(100000);
    mq_send(q, "m", 1, 0);
    return NULL;
}

static const char *verdict(long ticks)
{
    return ticks >= 5 ? "ticked meanwhile" : "stood still";
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);

    pthread_t w;
    pthread_create(&w, NULL, waiter, (void *)3L);
    struct sigevent se = {0};
    se.sigev_notify = SIGEV_THREAD;
    se.sigev_notify_function = notify;
    timer_t t;
    timer_create(CLOCK_MONOTONIC, &se, &t);
    struct itimerspec its = {{0, 50000000}, {0, 50000000}};
    timer_settime(t, 0, &its, NULL);
    pthread_join(w, NULL);
    timer_delete(t);
    printf("a SIGEV_THREAD timer woke a waiting thread: %s\n", fired >= 3 ? "yes" : "no");

    char name[64];
    snprintf(name, sizeof name, "/notify_threads.%d", (int)getpid());
    struct mq_attr at = {.mq_maxmsg = 4, .mq_msgsize = 8};
    q = mq_open(name, O_RDWR | O_CREAT, 0600, &at);
    mq_unlink(name);
    pthread_mutex_lock(&m);
    fired = 0;
    pthread_mutex_unlock(&m);
    printf("mq_notify: %d\n", mq_notify(q, &se));
    pthread_t s;
    pthread_create(&s, NULL, late_send, NULL);
    pthread_t tick = ticker_start();
    wait_for(1);
    printf("its function woke a waiting thread; the ticker %s\n", verdict(ticker_stop(tick)));
    pthread_join(s, NULL);
    mq_close(q);

    if (pipe(p))
        return 1;
    char buf[16] = {0};
    struct aiocb cb = {0};
    cb.aio_fildes = p[0];
    cb.aio_buf = buf;
    cb.aio_nbytes = 5;
    pthread_t lw;
    pthread_create(&lw, NULL, late_write, "hello");
    printf("aio_read: %d\n", aio_read(&cb));
    const struct aiocb *l[1] = {&cb};
    struct timespec zero = {0, 0};
    errno = 0;
    int r = aio_suspend(l, 1, &zero);
    printf("aio_suspend, zero timeout, pending: %d %s\n", r, strerrorname_np(errno));
    tick = ticker_start();
    while (aio_error(&cb) == EINPROGRESS)
        aio_suspend(l, 1, NULL);
    long ticks = ticker_stop(tick);
    printf("aio_read of a pipe: error %d, %zd bytes, \"%s\"; the ticker %s\n", aio_error(&cb), aio_return(&cb), buf,
           verdict(ticks));
    pthread_join(lw, NULL);

    memset(buf, 0, sizeof buf);
    struct aiocb rd = {0};
    rd.aio_fildes = p[0];
    rd.aio_buf = buf;
    rd.aio_nbytes = 5;
    rd.aio_lio_opcode = LIO_READ;
    struct aiocb *list[1] = {&rd};
    pthread_create(&lw, NULL, late_write, "world");
    tick = ticker_start();
    r = lio_listio(LIO_WAIT, list, 1, NULL);
    ticks = ticker_stop(tick);
    printf("lio_listio(LIO_WAIT): %d, %zd bytes, \"%s\"; the ticker %s\n", r, aio_return(&rd), buf, verdict(ticks));
    pthread_join(lw, NULL);
    return 0;
}
