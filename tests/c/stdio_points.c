/*
 * stdio_points: which stdio calls act on a deferred cancellation already
 * pending when they are called, compared with glibc. glibc's stdio acts
 * where it reads or writes the fd (its read and write are cancellation
 * points), not where the call is served from the stream's buffer. Each
 * call runs in a thread of its own that first makes its cancellation
 * pending; "point" means the thread ended there (PTHREAD_CANCELED).
 *
 *   reads served from the buffer, of a regular file and of a pipe: not
 *   points (on a pipe they acted, before, on entry)
 *   a read of a pipe stream whose buffer is empty (data in the pipe): a
 *   point
 *   writes that fit in a fully buffered stream, of a file and of a pipe:
 *   not points (on a pipe they acted, before)
 *   a write larger than the pipe stream's buffer: a point
 *   fflush and fclose of a stream holding output: points (they were not
 *   on a regular file, before); fflush of a stream with nothing pending:
 *   not a point
 *
 * usage: stdio_points
 * stdout: one line per call: its name, then "point" or "-".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static FILE *file_in, *file_out, *file_out_clean, *pipe_in, *pipe_out, *pipe_in_empty;
static char big[1 << 16];

static void call(int i)
{
    char b[64];
    char *line = NULL;
    size_t cap = 0;
    switch (i) {
    case 0:
        fgets(b, sizeof b, file_in);
        break;
    case 1:
        getc(file_in);
        break;
    case 2:
        fread(b, 1, 3, file_in);
        break;
    case 3:
        getline(&line, &cap, file_in);
        break;
    case 4:
        fgets(b, sizeof b, pipe_in);
        break;
    case 5:
        getc(pipe_in);
        break;
    case 6:
        fread(b, 1, 2, pipe_in);
        break;
    case 7:
        getline(&line, &cap, pipe_in);
        break;
    case 8:
        fgets(b, sizeof b, pipe_in_empty);
        break;
    case 9:
        fputs("abc", file_out);
        break;
    case 10:
        fwrite("abc", 1, 3, file_out);
        break;
    case 11:
        fputc('z', file_out);
        break;
    case 12:
        fputs("abc", pipe_out);
        break;
    case 13:
        fwrite("abc", 1, 3, pipe_out);
        break;
    case 14:
        fputc('z', pipe_out);
        break;
    case 15:
        fwrite(big, 1, sizeof big, pipe_out);
        break;
    case 16:
        fflush(file_out);
        break;
    case 17:
        fflush(file_out_clean);
        break;
    case 18:
        fputs("more", file_out);
        fclose(file_out);
        break;
    }
    free(line);
}

static const char *names[] = {
    "fgets_file_buffered",   "getc_file_buffered",  "fread_file_buffered", "getline_file_buffered",
    "fgets_pipe_buffered",   "getc_pipe_buffered",  "fread_pipe_buffered", "getline_pipe_buffered",
    "fgets_pipe_empty",      "fputs_file_fits",     "fwrite_file_fits",    "fputc_file_fits",
    "fputs_pipe_fits",       "fwrite_pipe_fits",    "fputc_pipe_fits",     "fwrite_pipe_too_big",
    "fflush_file_pending",   "fflush_file_nothing", "fclose_file_pending",
};

static void *run(void *arg)
{
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    pthread_cancel(pthread_self());
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
    call((int)(long)arg);
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    return NULL;
}

/* Drains the output pipe for the whole run. */
static void *drain(void *arg)
{
    int fd = *(int *)arg;
    char b[4096];
    while (read(fd, b, sizeof b) > 0)
        ;
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    char path[] = "/tmp/greenhook-stdio-points-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 1;
    for (int i = 0; i < 100; i++)
        dprintf(fd, "line %d\n", i);
    close(fd);
    char b[64];
    file_in = fopen(path, "r");
    fgets(b, sizeof b, file_in); /* the buffer now holds the rest */
    file_out = fopen(path, "a");
    file_out_clean = fopen(path, "a");

    int in[2], out[2], empty[2];
    if (pipe(in) || pipe(out) || pipe(empty))
        return 1;
    for (int i = 0; i < 20; i++)
        dprintf(in[1], "pipe line %d\n", i);
    pipe_in = fdopen(in[0], "r");
    fgets(b, sizeof b, pipe_in); /* the buffer now holds the rest */
    dprintf(empty[1], "one\n");
    pipe_in_empty = fdopen(empty[0], "r"); /* nothing buffered yet */
    pthread_t drainer;
    pthread_create(&drainer, NULL, drain, &out[0]);
    pipe_out = fdopen(out[1], "w");
    setvbuf(pipe_out, NULL, _IOFBF, 4096);
    fputs("x", pipe_out);

    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        pthread_t t;
        void *r;
        pthread_create(&t, NULL, run, (void *)(long)i);
        pthread_join(t, &r);
        printf("%-24s %s\n", names[i], r == PTHREAD_CANCELED ? "point" : "-");
    }
    fclose(pipe_out);
    pthread_join(drainer, NULL);
    unlink(path);
    return 0;
}
