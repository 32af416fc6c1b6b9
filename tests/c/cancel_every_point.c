/*
 * cancel_every_point: which calls act on a deferred cancellation that is
 * already pending when they are called, compared with glibc. Each call
 * runs in a thread of its own that first makes its own cancellation
 * pending (with cancellation disabled, then enabled again); a call that is
 * a cancellation point ends the thread (PTHREAD_CANCELED), one that is not
 * returns. The arguments are chosen so that no call waits: a ready pipe, a
 * free semaphore, zero timeouts, MSG_DONTWAIT, a non-blocking listener. glibc
 * acts before the system call whether or not it would wait; greenhook's
 * hooks passed such calls (a zero timeout, MSG_DONTWAIT, a non-blocking fd,
 * a free lock) straight to the real function, where nothing acted.
 *
 * Also here: what glibc does *not* make a point (flock, sendfile, fcntl
 * other than F_SETLKW, sched_yield, locks, sem_trywait, sem_clockwait on a
 * free semaphore, a join of an ended thread, stdio that does not reach the
 * fd); getaddrinfo is one where glibc reads a file or asks the kernel
 * (null hints, AI_ADDRCONFIG, a host or service name), not for a numeric
 * host and service with hints (before, it was never one: offloaded).
 *
 * usage: cancel_every_point
 * stdout: one line per call: its name, then "point" or "-".
 */
#define _GNU_SOURCE
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/random.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#pragma GCC diagnostic ignored "-Wunused-result"

static char dir[] = "/tmp/cancel_every_point.XXXXXX";
static int pipefd[2], filefd, lsock, sv[2], ep, msq, ptm, pts;
static mqd_t mq;
static char mq_name[64];
static sem_t sem;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static char buf[64];
static void *mapping;
static pthread_t done_thread;
static struct sockaddr_un addr;

/* A file in the run's directory. */
static const char *path(const char *name)
{
    static char p[4][128];
    static int next;
    char *s = p[next++ % 4];
    snprintf(s, sizeof p[0], "%s/%s", dir, name);
    return s;
}

static void *nothing(void *arg)
{
    return arg;
}

static void unlock(void *m)
{
    pthread_mutex_unlock(m);
}

static void on_alarm(int sig)
{
    (void)sig;
}

static const char *names[] = {
    "read",
    "readv",
    "write",
    "writev",
    "pread_file",
    "pwrite_file",
    "read_file",
    "write_file",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
    "fsync",
    "fdatasync",
    "sync_file_range",
    "msync",
    "close",
    "open",
    "open_rdwr",
    "open_nonblock",
    "openat",
    "creat",
    "fcntl_setlkw",
    "fcntl_getfl",
    "lockf",
    "flock",
    "accept",
    "accept4",
    "connect",
    "send",
    "sendto",
    "sendmsg",
    "sendmmsg",
    "recv",
    "recvfrom",
    "recvmsg",
    "recvmmsg",
    "poll",
    "ppoll",
    "select",
    "pselect",
    "epoll_wait",
    "epoll_pwait",
    "nanosleep",
    "clock_nanosleep",
    "sleep0",
    "usleep0",
    "sched_yield",
    "sem_wait",
    "sem_timedwait",
    "sem_clockwait",
    "sem_trywait",
    "cond_timedwait",
    "mutex_lock",
    "join",
    "testcancel",
    "sigtimedwait",
    "sigwait",
    "sigwaitinfo",
    "waitpid",
    "wait",
    "waitid",
    "system",
    "tcdrain",
    "msgsnd",
    "msgrcv",
    "mq_send",
    "mq_receive",
    "mq_timedsend",
    "mq_timedreceive",
    "getrandom",
    "aio_suspend",
    "fgets_buffered",
    "fputs_buffered",
    "printf_stdout_buffered",
    "fflush_file",
    "fclose_file",
    "fopen",
    "dup2",
    "shutdown",
    "fstat",
    "unlink",
    "sendfile",
    "splice",
    "copy_file_range",
    "fallocate",
    "ftruncate",
    "ioctl_fionread",
    "pthread_cond_signal",
    "cond_wait",
    "pause",
    "sigsuspend",
    "sigpause",
    "barrier_wait",
    "rwlock_rdlock",
    "fread_fdopen",
    "getc",
    "timedjoin",
    "tryjoin",
    "sem_timedwait_past",
    "socket_close",
    "syscall_getpid",
    "gai_numeric",
    "gai_numeric_no_flags",
    "gai_null_hints",
    "gai_addrconfig",
    "gai_host_name",
    "gai_service_name"
};

static void call(int i)
{
    switch (i) {
    case 0: /* read */
        { read(pipefd[0], buf, 1); }
        break;
    case 1: /* readv */
        { ({ struct iovec v = {buf, 1}; readv(pipefd[0], &v, 1); }); }
        break;
    case 2: /* write */
        { write(pipefd[1], "x", 1); }
        break;
    case 3: /* writev */
        { ({ struct iovec v = {"x", 1}; writev(pipefd[1], &v, 1); }); }
        break;
    case 4: /* pread_file */
        { pread(filefd, buf, 1, 0); }
        break;
    case 5: /* pwrite_file */
        { pwrite(filefd, "x", 1, 0); }
        break;
    case 6: /* read_file */
        { read(filefd, buf, 1); }
        break;
    case 7: /* write_file */
        { write(filefd, "x", 1); }
        break;
    case 8: /* preadv */
        { ({ struct iovec v = {buf, 1}; preadv(filefd, &v, 1, 0); }); }
        break;
    case 9: /* pwritev */
        { ({ struct iovec v = {"x", 1}; pwritev(filefd, &v, 1, 0); }); }
        break;
    case 10: /* preadv2 */
        { ({ struct iovec v = {buf, 1}; preadv2(filefd, &v, 1, 0, 0); }); }
        break;
    case 11: /* pwritev2 */
        { ({ struct iovec v = {"x", 1}; pwritev2(filefd, &v, 1, 0, 0); }); }
        break;
    case 12: /* fsync */
        { fsync(filefd); }
        break;
    case 13: /* fdatasync */
        { fdatasync(filefd); }
        break;
    case 14: /* sync_file_range */
        { sync_file_range(filefd, 0, 0, 0); }
        break;
    case 15: /* msync */
        { msync(mapping, 4096, MS_SYNC); }
        break;
    case 16: /* close */
        { close(dup(filefd)); }
        break;
    case 17: /* open */
        { ({ int f = open(path("file"), O_RDONLY); if (f >= 0) close(f); }); }
        break;
    case 18: /* open_rdwr */
        { ({ int f = open(path("file"), O_RDWR); if (f >= 0) close(f); }); }
        break;
    case 19: /* open_nonblock */
        { ({ int f = open(path("file"), O_RDONLY | O_NONBLOCK); if (f >= 0) close(f); }); }
        break;
    case 20: /* openat */
        { ({ int f = openat(AT_FDCWD, path("file"), O_RDONLY); if (f >= 0) close(f); }); }
        break;
    case 21: /* creat */
        { ({ int f = creat(path("file2"), 0600); if (f >= 0) close(f); }); }
        break;
    case 22: /* fcntl_setlkw */
        { ({ struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET}; fcntl(filefd, F_SETLKW, &l); }); }
        break;
    case 23: /* fcntl_getfl */
        { fcntl(filefd, F_GETFL); }
        break;
    case 24: /* lockf */
        { lockf(filefd, F_LOCK, 0); }
        break;
    case 25: /* flock */
        { flock(filefd, LOCK_EX); }
        break;
    case 26: /* accept */
        { accept(lsock, NULL, NULL); }
        break;
    case 27: /* accept4 */
        { accept4(lsock, NULL, NULL, 0); }
        break;
    case 28: /* connect */
        { ({ int s = socket(AF_UNIX, SOCK_STREAM, 0); connect(s, (void *)&addr, sizeof addr); close(s); }); }
        break;
    case 29: /* send */
        { send(sv[0], "x", 1, 0); }
        break;
    case 30: /* sendto */
        { sendto(sv[0], "x", 1, 0, NULL, 0); }
        break;
    case 31: /* sendmsg */
        { ({ struct iovec v = {"x", 1}; struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1}; sendmsg(sv[0], &m, 0); }); }
        break;
    case 32: /* sendmmsg */
        { ({ struct iovec v = {"x", 1}; struct mmsghdr m = {.msg_hdr = {.msg_iov = &v, .msg_iovlen = 1}}; sendmmsg(sv[0], &m, 1, 0); }); }
        break;
    case 33: /* recv */
        { recv(sv[1], buf, 1, MSG_DONTWAIT); }
        break;
    case 34: /* recvfrom */
        { recvfrom(sv[1], buf, 1, MSG_DONTWAIT, NULL, NULL); }
        break;
    case 35: /* recvmsg */
        { ({ struct iovec v = {buf, 1}; struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1}; recvmsg(sv[1], &m, MSG_DONTWAIT); }); }
        break;
    case 36: /* recvmmsg */
        { ({ struct iovec v = {buf, 1}; struct mmsghdr m = {.msg_hdr = {.msg_iov = &v, .msg_iovlen = 1}}; recvmmsg(sv[1], &m, 1, MSG_DONTWAIT, NULL); }); }
        break;
    case 37: /* poll */
        { poll(NULL, 0, 0); }
        break;
    case 38: /* ppoll */
        { ({ struct timespec z = {0}; ppoll(NULL, 0, &z, NULL); }); }
        break;
    case 39: /* select */
        { ({ struct timeval z = {0}; select(0, NULL, NULL, NULL, &z); }); }
        break;
    case 40: /* pselect */
        { ({ struct timespec z = {0}; pselect(0, NULL, NULL, NULL, &z, NULL); }); }
        break;
    case 41: /* epoll_wait */
        { ({ struct epoll_event e; epoll_wait(ep, &e, 1, 0); }); }
        break;
    case 42: /* epoll_pwait */
        { ({ struct epoll_event e; epoll_pwait(ep, &e, 1, 0, NULL); }); }
        break;
    case 43: /* nanosleep */
        { ({ struct timespec z = {0}; nanosleep(&z, NULL); }); }
        break;
    case 44: /* clock_nanosleep */
        { ({ struct timespec z = {0}; clock_nanosleep(CLOCK_MONOTONIC, 0, &z, NULL); }); }
        break;
    case 45: /* sleep0 */
        { sleep(0); }
        break;
    case 46: /* usleep0 */
        { usleep(0); }
        break;
    case 47: /* sched_yield */
        { sched_yield(); }
        break;
    case 48: /* sem_wait */
        { sem_wait(&sem); }
        break;
    case 49: /* sem_timedwait */
        { ({ struct timespec z = {0}; sem_timedwait(&sem, &z); }); }
        break;
    case 50: /* sem_clockwait */
        { ({ struct timespec z = {0}; sem_clockwait(&sem, CLOCK_MONOTONIC, &z); }); }
        break;
    case 51: /* sem_trywait */
        { sem_trywait(&sem); }
        break;
    case 52: /* cond_timedwait */
        { ({ struct timespec z = {0}; pthread_mutex_lock(&mu); pthread_cleanup_push(unlock, &mu); pthread_cond_timedwait(&cv, &mu, &z); pthread_cleanup_pop(1); }); }
        break;
    case 53: /* mutex_lock */
        { ({ pthread_mutex_lock(&mu); pthread_mutex_unlock(&mu); }); }
        break;
    case 54: /* join */
        { pthread_join(done_thread, NULL); }
        break;
    case 55: /* testcancel */
        { pthread_testcancel(); }
        break;
    case 56: /* sigtimedwait */
        { ({ sigset_t s; sigemptyset(&s); sigaddset(&s, SIGUSR2); struct timespec z = {0}; sigtimedwait(&s, NULL, &z); }); }
        break;
    case 57: /* sigwait */
        { ({ sigset_t s; sigemptyset(&s); sigaddset(&s, SIGUSR2); pthread_sigmask(SIG_BLOCK, &s, NULL); pthread_kill(pthread_self(), SIGUSR2); int g; sigwait(&s, &g); }); }
        break;
    case 58: /* sigwaitinfo */
        { ({ sigset_t s; sigemptyset(&s); sigaddset(&s, SIGUSR2); pthread_sigmask(SIG_BLOCK, &s, NULL); pthread_kill(pthread_self(), SIGUSR2); sigwaitinfo(&s, NULL); }); }
        break;
    case 59: /* waitpid */
        { ({ pid_t p = fork(); if (p == 0) _exit(0); usleep(50000); waitpid(p, NULL, 0); }); }
        break;
    case 60: /* wait */
        { ({ pid_t p = fork(); if (p == 0) _exit(0); usleep(50000); wait(NULL); }); }
        break;
    case 61: /* waitid */
        { ({ pid_t p = fork(); if (p == 0) _exit(0); usleep(50000); siginfo_t i; waitid(P_PID, p, &i, WEXITED); }); }
        break;
    case 62: /* system */
        { system("true"); }
        break;
    case 63: /* tcdrain */
        { tcdrain(pts); }
        break;
    case 64: /* msgsnd */
        { ({ struct { long t; char c; } m = {1, 'x'}; msgsnd(msq, &m, 1, IPC_NOWAIT); }); }
        break;
    case 65: /* msgrcv */
        { ({ struct { long t; char c; } m; msgrcv(msq, &m, 1, 0, IPC_NOWAIT); }); }
        break;
    case 66: /* mq_send */
        { mq_send(mq, "x", 1, 0); }
        break;
    case 67: /* mq_receive */
        { ({ char b[64]; mq_receive(mq, b, 64, NULL); }); }
        break;
    case 68: /* mq_timedsend */
        { ({ struct timespec z = {0}; mq_timedsend(mq, "x", 1, 0, &z); }); }
        break;
    case 69: /* mq_timedreceive */
        { ({ char b[64]; struct timespec z = {0}; mq_timedreceive(mq, b, 64, NULL, &z); }); }
        break;
    case 70: /* getrandom */
        { getrandom(buf, 1, 0); }
        break;
    case 71: /* aio_suspend */
        { ({ struct timespec z = {0}; const struct aiocb *l[1] = {NULL}; aio_suspend(l, 1, &z); }); }
        break;
    case 72: /* fgets_buffered */
        { ({ static FILE *f; if (!f) { f = fopen(path("file"), "r"); } fgets(buf, 2, f); }); }
        break;
    case 73: /* fputs_buffered */
        { ({ static FILE *f; if (!f) { f = fopen(path("file3"), "w"); } fputs("x", f); }); }
        break;
    case 74: /* printf_stdout_buffered */
        { printf("%s", ""); }
        break;
    case 75: /* fflush_file */
        { ({ FILE *f = fopen(path("file3"), "w"); fputs("x", f); fflush(f); }); }
        break;
    case 76: /* fclose_file */
        { ({ FILE *f = fopen(path("file3"), "w"); fputs("x", f); fclose(f); }); }
        break;
    case 77: /* fopen */
        { ({ FILE *f = fopen(path("file3"), "w"); if (f) fclose(f); }); }
        break;
    case 78: /* dup2 */
        { dup2(filefd, 99); }
        break;
    case 79: /* shutdown */
        { shutdown(99, SHUT_RDWR); }
        break;
    case 80: /* fstat */
        { ({ struct stat st; fstat(filefd, &st); }); }
        break;
    case 81: /* unlink */
        { unlink(path("nonexistent")); }
        break;
    case 82: /* sendfile */
        { ({ off_t o = 0; sendfile(sv[0], filefd, &o, 1); }); }
        break;
    case 83: /* splice */
        { ({ write(pipefd[1], "x", 1); splice(pipefd[0], NULL, sv[0], NULL, 1, 0); }); }
        break;
    case 84: /* copy_file_range */
        { ({ loff_t a = 0, b = 10; copy_file_range(filefd, &a, filefd, &b, 1, 0); }); }
        break;
    case 85: /* fallocate */
        { fallocate(filefd, 0, 0, 10); }
        break;
    case 86: /* ftruncate */
        { ftruncate(filefd, 100); }
        break;
    case 87: /* ioctl_fionread */
        { ({ int n; ioctl(pipefd[0], FIONREAD, &n); }); }
        break;
    case 88: /* pthread_cond_signal */
        { pthread_cond_signal(&cv); }
        break;
    case 89: /* cond_wait */
        { pthread_mutex_lock(&mu); pthread_cleanup_push(unlock, &mu); pthread_cond_wait(&cv, &mu); pthread_cleanup_pop(1); }
        break;
    case 90: /* pause */
        { alarm(1); pause(); }
        break;
    case 91: /* sigsuspend */
        { sigset_t s; sigemptyset(&s); alarm(1); sigsuspend(&s); }
        break;
    case 92: /* sigpause */
        { sigset_t s; sigemptyset(&s); sigaddset(&s, SIGUSR2); pthread_sigmask(SIG_BLOCK, &s, NULL); alarm(1); sigpause(SIGUSR2); }
        break;
    case 93: /* barrier_wait */
        { pthread_barrier_t b; pthread_barrier_init(&b, NULL, 1); pthread_barrier_wait(&b); }
        break;
    case 94: /* rwlock_rdlock */
        { pthread_rwlock_t l = PTHREAD_RWLOCK_INITIALIZER; pthread_rwlock_rdlock(&l); pthread_rwlock_unlock(&l); }
        break;
    case 95: /* fread_fdopen */
        { int f = open(path("file"), O_RDONLY); FILE *g = fdopen(f, "r"); char b[8]; fread(b, 1, 2, g); fclose(g); }
        break;
    case 96: /* getc */
        { FILE *g = fopen(path("file"), "r"); int c = getc(g); fclose(g); (void)c; }
        break;
    case 97: /* timedjoin */
        { struct timespec z = {0}; pthread_timedjoin_np(done_thread, NULL, &z); }
        break;
    case 98: /* tryjoin */
        { pthread_tryjoin_np(done_thread, NULL); }
        break;
    case 99: /* sem_timedwait_past */
        { struct timespec z = {0}; sem_timedwait(&sem, &z); }
        break;
    case 100: /* socket_close */
        { int s = socket(AF_INET, SOCK_DGRAM, 0); close(s); }
        break;
    case 101: /* syscall_getpid */
        { syscall(SYS_getpid); }
        break;
    case 102: /* gai_numeric */
        { struct addrinfo h = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV}, *r; if (getaddrinfo("127.0.0.1", "80", &h, &r) == 0) freeaddrinfo(r); }
        break;
    case 103: /* gai_numeric_no_flags */
        { struct addrinfo h = {.ai_flags = 0}, *r; if (getaddrinfo("127.0.0.1", "80", &h, &r) == 0) freeaddrinfo(r); }
        break;
    case 104: /* gai_null_hints: they default to AI_ADDRCONFIG */
        { struct addrinfo *r; if (getaddrinfo("127.0.0.1", "80", NULL, &r) == 0) freeaddrinfo(r); }
        break;
    case 105: /* gai_addrconfig */
        { struct addrinfo h = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_ADDRCONFIG}, *r; if (getaddrinfo("127.0.0.1", "80", &h, &r) == 0) freeaddrinfo(r); }
        break;
    case 106: /* gai_host_name: /etc/hosts */
        { struct addrinfo h = {.ai_flags = AI_NUMERICSERV}, *r; if (getaddrinfo("localhost", "80", &h, &r) == 0) freeaddrinfo(r); }
        break;
    case 107: /* gai_service_name: /etc/services */
        { struct addrinfo h = {.ai_flags = AI_NUMERICHOST}, *r; if (getaddrinfo("127.0.0.1", "http", &h, &r) == 0) freeaddrinfo(r); }
        break;
    }
}

static void *run(void *arg)
{
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    pthread_cancel(pthread_self());
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
    call((int)(long)arg);
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    if (!mkdtemp(dir))
        return 1;
    pipe(pipefd);
    write(pipefd[1], "abcdefghijklmnopqrstuvwxyz", 26);
    filefd = open(path("file"), O_RDWR | O_CREAT | O_TRUNC, 0600);
    write(filefd, "hello\nworld\n", 12);
    mapping = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, filefd, 0);
    lsock = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path("sock"));
    bind(lsock, (void *)&addr, sizeof addr);
    listen(lsock, 100);
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    for (int i = 0; i < 50; i++)
        write(sv[0], "y", 1);
    ep = epoll_create1(0);
    msq = msgget(IPC_PRIVATE, 0600);
    struct {
        long t;
        char c;
    } m = {1, 'x'};
    for (int i = 0; i < 5; i++)
        msgsnd(msq, &m, 1, 0);
    struct mq_attr at = {.mq_maxmsg = 10, .mq_msgsize = 64};
    snprintf(mq_name, sizeof mq_name, "/cancel_every_point.%d", (int)getpid());
    mq = mq_open(mq_name, O_RDWR | O_CREAT | O_NONBLOCK, 0600, &at);
    for (int i = 0; i < 3; i++)
        mq_send(mq, "x", 1, 0);
    sem_init(&sem, 0, 1000);
    openpty(&ptm, &pts, NULL, NULL, NULL);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        /* An ended thread to join (or time-join) without waiting. */
        pthread_create(&done_thread, NULL, nothing, NULL);
        usleep(10000);
        pthread_t t;
        pthread_create(&t, NULL, run, (void *)(long)i);
        void *r;
        pthread_join(t, &r);
        printf("%-24s %s\n", names[i], r == PTHREAD_CANCELED ? "point" : "-");
    }
    mq_unlink(mq_name);
    msgctl(msq, IPC_RMID, NULL);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}
