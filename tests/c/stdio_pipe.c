/* stdio on an empty pipe must not freeze the process: a reader thread
 * blocks in MODE (fgets|getline|fread|fgetc|scanf|fwrite) while a writer
 * thread feeds the pipe after 100 ms in pieces; a ticker ticks every 10 ms.
 * stdout: what was read (deterministic). stderr: the ticker's report. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ticker.h"

static int fds[2];
static const char *mode;
static void *writer(void *a) {
    (void)a;
    if (!strcmp(mode, "fwrite")) { /* slow reader side */
        FILE *in = fdopen(fds[0], "r");
        char buf[1000];
        size_t total = 0, n;
        usleep(100000);
        while ((n = fread(buf, 1, sizeof buf, in)) > 0) { total += n; usleep(1000); }
        printf("drained %zu\n", total);
        fclose(in);
        return NULL;
    }
    const char *pieces[] = {"hello ", "wor", "ld\n42 17\nsecond line\n", "tail"};
    for (int i = 0; i < 4; i++) {
        usleep(100000);
        if (write(fds[1], pieces[i], strlen(pieces[i])) < 0) perror("write");
    }
    usleep(50000);
    close(fds[1]);
    return NULL;
}

static void *reader(void *a) {
    (void)a;
    if (!strcmp(mode, "fwrite")) {
        FILE *out = fdopen(fds[1], "w");
        static char blk[300000];
        memset(blk, 'x', sizeof blk);
        size_t n = fwrite(blk, 1, sizeof blk, out);
        fclose(out);
        printf("wrote %zu\n", n);
        return NULL;
    }
    FILE *in = fdopen(fds[0], "r");
    if (!strcmp(mode, "fgets")) {
        char line[100];
        while (fgets(line, sizeof line, in)) printf("fgets [%s]\n", line);
    } else if (!strcmp(mode, "getline")) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, in)) >= 0) printf("getline %zd [%s]\n", n, line);
        free(line);
    } else if (!strcmp(mode, "fread")) {
        char buf[64] = {0};
        size_t n = fread(buf, 1, 20, in);
        printf("fread %zu [%.*s]\n", n, (int)n, buf);
        n = fread(buf, 1, sizeof buf, in);
        printf("fread %zu [%.*s] eof=%d\n", n, (int)n, buf, feof(in));
    } else if (!strcmp(mode, "fgetc")) {
        int c, count = 0;
        while ((c = fgetc(in)) != EOF) { putchar(c); count++; }
        printf("\nfgetc %d\n", count);
    } else if (!strcmp(mode, "scanf")) {
        char w1[32], w2[32];
        int a, b;
        int r = fscanf(in, "%31s %31s %d %d", w1, w2, &a, &b);
        printf("fscanf %d %s %s %d %d\n", r, w1, w2, a, b);
        while (fgetc(in) != EOF) {}
    }
    printf("eof=%d error=%d\n", feof(in), ferror(in));
    fclose(in);
    return NULL;
}

int main(int argc, char **argv) {
    mode = argc > 1 ? argv[1] : "fgets";
    if (pipe(fds)) return 1;
    pthread_t t = ticker_start(), w, r;
    pthread_create(&r, NULL, reader, NULL);
    pthread_create(&w, NULL, writer, NULL);
    pthread_join(r, NULL);
    pthread_join(w, NULL);
    ticker_stop(t);
    return 0;
}
