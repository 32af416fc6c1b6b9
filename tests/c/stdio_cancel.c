/*
 * stdio_cancel: a thread cancelled while blocked in stdio on a pipe, then
 * another thread using the same stream, compared with glibc (whose stdio
 * lets the stream's lock go in a cleanup handler).
 *
 *   fgets on an empty pipe: cancelled; main then reads a line from the
 *   same FILE (it waited for ever for the cancelled thread's lock)
 *   fwrite of 1 MiB into a full pipe: cancelled (it looked for room every
 *   millisecond for ever); main then writes to the same FILE, drained by
 *   a child
 *
 * usage: stdio_cancel
 * stdout: one line per case.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static FILE *in, *out;

static void *reader(void *arg)
{
    (void)arg;
    char b[64];
    fgets(b, sizeof b, in);
    printf("fgets returned\n");
    return NULL;
}

static void *writer(void *arg)
{
    (void)arg;
    char *b = calloc(1, 1 << 20);
    fwrite(b, 1, 1 << 20, out);
    fflush(out);
    printf("fwrite returned\n");
    return NULL;
}

static void cancelled(const char *what, void *(*fn)(void *))
{
    pthread_t t;
    pthread_create(&t, NULL, fn, NULL);
    usleep(200000);
    pthread_cancel(t);
    void *r;
    pthread_join(t, &r);
    printf("a thread blocked in %s: %s\n", what, r == PTHREAD_CANCELED ? "cancelled" : "not cancelled");
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int p[2];
    if (pipe(p) != 0)
        return 1;
    in = fdopen(p[0], "r");
    cancelled("fgets", reader);
    if (write(p[1], "one\n", 4) != 4)
        return 1;
    char b[64];
    printf("main then reads from the same FILE: %s", fgets(b, sizeof b, in) ? b : "nothing\n");
    fclose(in);
    close(p[1]);

    if (pipe(p) != 0)
        return 1;
    out = fdopen(p[1], "w");
    cancelled("fwrite", writer);
    pid_t c = fork();
    if (c == 0) {
        close(p[1]);
        while (read(p[0], b, sizeof b) > 0) {
        }
        _exit(0);
    }
    close(p[0]);
    int r = fputs("after\n", out);
    int f = fflush(out);
    printf("main then writes to the same FILE: %s\n", r >= 0 && f == 0 ? "done" : "failed");
    fclose(out);
    waitpid(c, NULL, 0);
    return 0;
}
