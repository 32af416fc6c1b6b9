/*
 * fifo_open: two threads of one program meet at a FIFO, each end opened
 * with a blocking open: a reader first, then a writer 200 ms later, and
 * the other way round; through open, openat, creat and fopen; and a
 * writer that comes and goes without writing (the reader then reads EOF).
 * Under greenhook both threads are fibers of one hub: a blocking open in
 * the kernel would hold it, and the other end would never come. A ticker
 * must also run meanwhile (3 ticks of 20 ms or more during each meeting). Then the calls that never wait (O_RDWR, a
 * non-blocking write-only open with no reader) and bad input.
 *
 * usage: fifo_open
 * stdout: one line per case: what was read, the fd's O_NONBLOCK, errors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#define TICKER_MS 20
#include "ticker.h"

static char path[64];
static char dirpath[48];

enum how { OPEN, OPENAT, CREAT, FOPEN };
static const char *hows[] = {"open", "openat", "creat", "fopen"};

struct end {
    enum how how;
    int delay_ms;
    int write_nothing;
};

static const char *blocking(int fd)
{
    return fcntl(fd, F_GETFL) & O_NONBLOCK ? "O_NONBLOCK" : "blocking";
}

static void *writer(void *arg)
{
    struct end *e = arg;
    usleep(e->delay_ms * 1000);
    if (e->how == FOPEN) {
        FILE *f = fopen(path, "w");
        if (!f) {
            perror("writer fopen");
            exit(1);
        }
        if (!e->write_nothing)
            fputs("hello\n", f);
        fclose(f);
        return NULL;
    }
    int fd = e->how == CREAT ? creat(path, 0600)
             : e->how == OPENAT ? openat(open(dirpath, O_DIRECTORY), strrchr(path, '/') + 1, O_WRONLY)
                                : open(path, O_WRONLY);
    if (fd < 0) {
        perror("writer open");
        exit(1);
    }
    printf("  writer (%s): %s\n", hows[e->how], blocking(fd));
    if (!e->write_nothing && write(fd, "hello\n", 6) != 6)
        perror("writer write");
    close(fd);
    return NULL;
}

/* The reader opens after `reader_delay` ms, the writer after its own. */
static void meet(enum how how, int reader_delay, int writer_delay, int write_nothing)
{
    struct end e = {how, writer_delay, write_nothing};
    long before = atomic_load(&ticker_count);
    pthread_t w;
    pthread_create(&w, NULL, writer, &e);
    usleep(reader_delay * 1000);
    char buf[32] = "";
    ssize_t n;
    const char *fl;
    if (how == FOPEN) {
        FILE *f = fopen(path, "r");
        if (!f) {
            perror("reader fopen");
            exit(1);
        }
        fl = blocking(fileno(f));
        n = fgets(buf, sizeof buf, f) ? (ssize_t)strlen(buf) : 0;
        fclose(f);
    } else {
        int fd = how == OPENAT ? openat(open(dirpath, O_DIRECTORY), strrchr(path, '/') + 1, O_RDONLY)
                               : open(path, O_RDONLY);
        if (fd < 0) {
            perror("reader open");
            exit(1);
        }
        fl = blocking(fd);
        n = read(fd, buf, sizeof buf - 1);
        ssize_t eof = read(fd, buf + (n > 0 ? n : 0), 1);
        if (eof != 0)
            printf("  reader: second read %zd, not EOF\n", eof);
        close(fd);
    }
    pthread_join(w, NULL);
    long during = atomic_load(&ticker_count) - before;
    buf[strcspn(buf, "\n")] = 0;
    printf("%s, reader at %d ms, writer at %d ms%s: read %zd \"%s\", reader %s, ticker ran: %s\n", hows[how],
           reader_delay, writer_delay, write_nothing ? ", writing nothing" : "", n, buf, fl,
           during >= 3 ? "yes" : "no");
    fflush(stdout);
    if (during < 3)
        fprintf(stderr, "%s: %ld ticks meanwhile\n", hows[how], during);
}

static const char *flag_names(int fl)
{
    static char b[96];
    snprintf(b, sizeof b, "%s%s%s%s", fl & O_NONBLOCK ? "O_NONBLOCK " : "", fl & O_APPEND ? "O_APPEND " : "",
             fl & O_NOATIME ? "O_NOATIME " : "", (fl & O_ACCMODE) == O_RDONLY ? "O_RDONLY" : (fl & O_ACCMODE) == O_WRONLY ? "O_WRONLY" : "O_RDWR");
    return b;
}

static void on_alarm(int sig)
{
    (void)sig;
}

/* A writer with no reader, interrupted by a handler without SA_RESTART
 * 300 ms in: EINTR, as the blocking open gives (the classic timeout). */
static void *interrupted_writer(void *arg)
{
    (void)arg;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    struct itimerval it = {.it_value = {0, 300000}};
    setitimer(ITIMER_REAL, &it, NULL);
    errno = 0;
    int fd = open(path, O_WRONLY);
    printf("writer alone, SIGALRM without SA_RESTART: %d %s\n", fd, strerror(errno));
    return NULL;
}

/* Regular files through the same hooks, in a thread (a fiber under
 * greenhook): the flags and streams must be exactly what they ask for. */
static void *regular_files(void *arg)
{
    (void)arg;
    char file[80];
    snprintf(file, sizeof file, "%s/regular", dirpath);
    FILE *f = fopen(file, "w");
    fputs("abc", f);
    printf("fopen w: F_GETFL %s\n", flag_names(fcntl(fileno(f), F_GETFL)));
    fclose(f);
    f = fopen(file, "a");
    printf("fopen a: ftell before writing %ld, F_GETFL %s\n", ftell(f), flag_names(fcntl(fileno(f), F_GETFL)));
    fputs("de", f);
    fclose(f);
    f = fopen(file, "re");
    char buf[16] = "";
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    printf("fopen re: read %zu \"%s\", cloexec %s, F_GETFL %s\n", n, buf,
           fcntl(fileno(f), F_GETFD) & FD_CLOEXEC ? "yes" : "no", flag_names(fcntl(fileno(f), F_GETFL)));
    fclose(f);
    errno = 0;
    f = fopen(file, "wx");
    printf("fopen wx on an existing file: %s %s\n", f ? "FILE" : "NULL", strerror(errno));
    f = fopen(file, "r+");
    printf("fopen r+: %s\n", f ? "FILE" : "NULL");
    if (f)
        fclose(f);
    int fd = open(file, O_WRONLY | O_APPEND | O_NOATIME);
    printf("open O_WRONLY|O_APPEND|O_NOATIME: F_GETFL %s\n", fd >= 0 ? flag_names(fcntl(fd, F_GETFL)) : strerror(errno));
    close(fd);
    fd = open(file, O_RDONLY | O_NONBLOCK);
    printf("open O_RDONLY|O_NONBLOCK: F_GETFL %s\n", flag_names(fcntl(fd, F_GETFL)));
    close(fd);
    fd = openat(AT_FDCWD, file, O_WRONLY | O_TRUNC);
    printf("openat O_TRUNC: F_GETFL %s, size now %ld\n", flag_names(fcntl(fd, F_GETFL)), (long)lseek(fd, 0, SEEK_END));
    close(fd);
    errno = 0;
    fd = open(dirpath, O_WRONLY);
    printf("open a directory O_WRONLY: %d %s\n", fd, strerror(errno));
    unlink(file);
    return NULL;
}

int main(void)
{
    snprintf(dirpath, sizeof dirpath, "/tmp/greenhook-fifo-%d", (int)getpid());
    snprintf(path, sizeof path, "%s/fifo", dirpath);
    if (mkdir(dirpath, 0700) != 0 || mkfifo(path, 0600) != 0) {
        perror("mkfifo");
        return 1;
    }
    pthread_t t = ticker_start();
    for (enum how h = OPEN; h <= FOPEN; h++) {
        meet(h, 0, 200, 0);
        meet(h, 200, 0, 0);
    }
    meet(OPEN, 0, 200, 1);
    ticker_stop(t);
    struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART */
    sigaction(SIGALRM, &sa, NULL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &s, NULL); /* the writer's thread takes it */
    pthread_t iw;
    pthread_create(&iw, NULL, interrupted_writer, NULL);
    pthread_join(iw, NULL);
    pthread_t r;
    pthread_create(&r, NULL, regular_files, NULL);
    pthread_join(r, NULL);

    int rw = open(path, O_RDWR);
    printf("O_RDWR: %s, %s\n", rw >= 0 ? "opened" : strerror(errno), rw >= 0 ? blocking(rw) : "-");
    close(rw);
    errno = 0;
    int nb = open(path, O_WRONLY | O_NONBLOCK);
    printf("O_WRONLY|O_NONBLOCK, no reader: %d %s\n", nb, strerror(errno));
    errno = 0;
    const char *volatile null_path = NULL; /* volatile: past the compiler's nonnull check */
    int bad = open(null_path, O_RDONLY);
    printf("open(NULL): %d %s\n", bad, strerror(errno));
    errno = 0;
    int none = open("/tmp/greenhook-no-such-fifo/x", O_RDONLY);
    printf("open(missing): %d %s\n", none, strerror(errno));
    errno = 0;
    FILE *fnone = fopen("/tmp/greenhook-no-such-fifo/x", "r");
    printf("fopen(missing): %s %s\n", fnone ? "FILE" : "NULL", strerror(errno));
    unlink(path);
    rmdir(dirpath);
    return 0;
}
