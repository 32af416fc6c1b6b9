/*
 * stdio_fiber_locks: a FILE's lock belongs to the thread that holds it
 * (glibc's recursive lock, owned by the thread's descriptor). Under the
 * preload with per-fiber TLS, threads are fibers with descriptors of their
 * own: a thread that waits while holding a FILE (its own flockfile, or a
 * long fputs to a full pipe) must not make another thread's stdio call on
 * that FILE block the OS thread they share (issue 10, step 8).
 *
 * usage: stdio_fiber_locks MODE
 *   full_pipe  writers A and B put 40 records each (A with fputs, 3000
 *              bytes; B with fprintf, 1000 bytes) to one FILE on a pipe
 *              that a slow reader thread drains (usleep between reads), so
 *              the pipe is full most of the time. Every record must arrive
 *              whole: "full_pipe: A 40/40 whole, B 40/40 whole, 160000
 *              bytes".
 *   flockfile  thread A takes stdout with flockfile, prints "A1", sleeps
 *              20 ms, prints "A2", unlocks; thread B prints "B" meanwhile
 *              (it must wait for A's funlockfile), then C uses
 *              ftrylockfile while A holds it (EBUSY-like non-zero) and after.
 *              B and C start once A holds stdout, A lets go only after C's
 *              first try, and C's second try comes once B printed, so
 *              after A and then B let go (semaphores, not sleeps: on a
 *              loaded machine a native thread may not run for a while).
 * alarm(20): a hang becomes a SIGALRM death.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static FILE *g_out;
static int g_pipe[2];
enum { RECORDS = 40, A_LEN = 3000, B_LEN = 1000 };

static pthread_t spawn(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    if (pthread_create(&t, NULL, fn, arg) != 0) {
        perror("pthread_create");
        exit(1);
    }
    return t;
}

/* A record: a tag letter, its number, filler of the same letter, a newline. */
static void *writer_a(void *arg)
{
    (void)arg;
    char *rec = malloc(A_LEN + 1);
    for (int i = 0; i < RECORDS; i++) {
        int n = snprintf(rec, A_LEN, "A%02d", i);
        memset(rec + n, 'a', A_LEN - n - 1);
        rec[A_LEN - 1] = '\n';
        rec[A_LEN] = 0;
        fputs(rec, g_out);
    }
    free(rec);
    fflush(g_out);
    return NULL;
}

static void *writer_b(void *arg)
{
    (void)arg;
    char fill[B_LEN];
    memset(fill, 'b', sizeof fill);
    for (int i = 0; i < RECORDS; i++)
        fprintf(g_out, "B%02d%.*s\n", i, B_LEN - 4, fill);
    fflush(g_out);
    return NULL;
}

static char g_got[RECORDS * (A_LEN + B_LEN) + 1];
static size_t g_len;

static void *reader(void *arg)
{
    (void)arg;
    for (;;) {
        usleep(2000);
        ssize_t n = read(g_pipe[0], g_got + g_len, 4096);
        if (n <= 0)
            break;
        g_len += (size_t)n;
    }
    return NULL;
}

static void full_pipe(void)
{
    if (pipe(g_pipe) != 0) {
        perror("pipe");
        exit(1);
    }
    g_out = fdopen(g_pipe[1], "w");
    pthread_t r = spawn(reader, NULL);
    pthread_t a = spawn(writer_a, NULL), b = spawn(writer_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    fclose(g_out);
    pthread_join(r, NULL);
    int whole_a = 0, whole_b = 0;
    for (char *line = strtok(g_got, "\n"); line; line = strtok(NULL, "\n")) {
        size_t len = strlen(line);
        char c = line[0] == 'A' ? 'a' : 'b';
        size_t want = (line[0] == 'A' ? A_LEN : B_LEN) - 1;
        int ok = len == want;
        for (size_t i = 3; ok && i < len; i++)
            ok = line[i] == c;
        if (ok)
            *(line[0] == 'A' ? &whole_a : &whole_b) += 1;
    }
    printf("full_pipe: A %d/%d whole, B %d/%d whole, %zu bytes\n", whole_a, RECORDS, whole_b, RECORDS, g_len);
}

static int g_try_held, g_try_free;
/* A holds stdout (posted twice); C tried while A held it; B printed */
static sem_t g_held, g_tried, g_printed;

static void wait_for(sem_t *s)
{
    while (sem_wait(s) != 0) {
    }
}

static void *holder(void *arg)
{
    (void)arg;
    flockfile(stdout);
    sem_post(&g_held);
    sem_post(&g_held);
    printf("A1\n");
    usleep(20000);
    wait_for(&g_tried);
    printf("A2\n");
    fflush(stdout);
    funlockfile(stdout);
    return NULL;
}

static void *printer(void *arg)
{
    (void)arg;
    wait_for(&g_held);
    printf("B\n");
    fflush(stdout);
    sem_post(&g_printed);
    return NULL;
}

static void *trier(void *arg)
{
    (void)arg;
    wait_for(&g_held);
    g_try_held = ftrylockfile(stdout) != 0;
    if (!g_try_held)
        funlockfile(stdout);
    sem_post(&g_tried);
    wait_for(&g_printed);
    g_try_free = ftrylockfile(stdout) == 0;
    if (g_try_free)
        funlockfile(stdout);
    return NULL;
}

static void flockfiles(void)
{
    sem_init(&g_held, 0, 0);
    sem_init(&g_tried, 0, 0);
    sem_init(&g_printed, 0, 0);
    pthread_t a = spawn(holder, NULL), b = spawn(printer, NULL), c = spawn(trier, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_join(c, NULL);
    printf("ftrylockfile: busy while held %s, free after %s\n", g_try_held ? "yes" : "no", g_try_free ? "yes" : "no");
}

int main(int argc, char **argv)
{
    alarm(20);
    if (argc == 2 && !strcmp(argv[1], "full_pipe"))
        full_pipe();
    else if (argc == 2 && !strcmp(argv[1], "flockfile"))
        flockfiles();
    else {
        fprintf(stderr, "usage: %s full_pipe|flockfile\n", argv[0]);
        return 1;
    }
    return 0;
}
