/*
 * stdio_wide_inline: stdio calls that reach the fd through entry points
 * the byte hooks did not see, on a pipe whose other end is served late by
 * another thread, compared with glibc. A third thread counts 10 ms ticks
 * meanwhile. Unhooked, each read or wrote the fd in the kernel: the hub
 * stalled, the other thread never came, and the run hung.
 *
 *   inline: getc_unlocked and putc_unlocked as <bits/stdio.h> inlines them
 *   in optimised code (they call __uflow and __overflow)
 *   wide_in: fgetwc, getwc, fgetws (a line in two writes), fwscanf
 *   wide_out: fputwc, fputws (longer than the pipe holds), fwprintf
 *
 * usage: stdio_wide_inline inline|wide_in|wide_out
 * stdout: what was read or written; the ticker's verdict.
 */
#define _GNU_SOURCE
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

#if !defined __USE_EXTERN_INLINES
#error "build with optimisation: the inline getc_unlocked is under test"
#endif

static int p[2];
static volatile int ticks, done;

static void *ticker(void *arg)
{
    (void)arg;
    while (!done) {
        usleep(10000);
        ticks++;
    }
    return NULL;
}

/* Writes the pieces 50 ms apart, then closes the write end. */
static void *writer(void *arg)
{
    const char **pieces = arg;
    for (int i = 0; pieces[i]; i++) {
        usleep(50000);
        if (write(p[1], pieces[i], strlen(pieces[i])) < 0)
            break;
    }
    close(p[1]);
    return NULL;
}

/* Reads everything after 100 ms; the count of bytes in *arg. */
static void *reader(void *arg)
{
    usleep(100000);
    size_t n = 0;
    char b[4096];
    ssize_t r;
    while ((r = read(p[0], b, sizeof b)) > 0)
        n += r;
    *(size_t *)arg = n;
    return NULL;
}

static const char *inline_pieces[] = {"abc\n", "def\n", "ghi\n", NULL};
static const char *wide_pieces[] = {"h\xc3\xa9llo w", "\xc3\xb6rld\n", "zw\xc3\xb6lf\n", "42 7\n", NULL};

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    setlocale(LC_ALL, "C.UTF-8");
    if (pipe(p))
        return 1;
    pthread_t tick, other;
    pthread_create(&tick, NULL, ticker, NULL);
    size_t got = 0;
    if (strcmp(argv[1], "inline") == 0) {
        FILE *in = fdopen(p[0], "r");
        pthread_create(&other, NULL, writer, inline_pieces);
        char line[64];
        int n = 0, c;
        while ((c = getc_unlocked(in)) != EOF && n < 63)
            line[n++] = (char)c;
        line[n] = 0;
        pthread_join(other, NULL);
        fclose(in);
        printf("getc_unlocked read %d bytes: %s", n, line);
        if (pipe(p))
            return 1;
        FILE *out = fdopen(p[1], "w");
        setvbuf(out, NULL, _IOFBF, 4096);
        pthread_create(&other, NULL, reader, &got);
        for (int i = 0; i < 200000; i++)
            putc_unlocked('a' + i % 26, out);
        fclose(out);
        pthread_join(other, NULL);
        printf("putc_unlocked: the reader got %zu bytes\n", got);
    } else if (strcmp(argv[1], "wide_in") == 0) {
        FILE *in = fdopen(p[0], "r");
        pthread_create(&other, NULL, writer, wide_pieces);
        wint_t a = fgetwc(in), b = getwc(in);
        wchar_t line[64];
        wchar_t *l = fgetws(line, 64, in);
        wchar_t *l2 = fgetws(line + 32, 32, in);
        int x = 0, y = 0;
        int k = fwscanf(in, L"%d %d", &x, &y);
        wint_t end = fgetwc(in);
        wint_t eof = fgetwc(in);
        pthread_join(other, NULL);
        printf("fgetwc %lc, getwc %lc, fgetws %ls", (wint_t)a, (wint_t)b, l ? l : L"(null)\n");
        printf("fgetws %ls", l2 ? l2 : L"(null)\n");
        printf("fwscanf %d: %d %d; then %s, then %s\n", k, x, y, end == L'\n' ? "the newline" : "?", eof == WEOF ? "WEOF" : "?");
        fclose(in);
    } else if (strcmp(argv[1], "wide_out") == 0) {
        FILE *out = fdopen(p[1], "w");
        pthread_create(&other, NULL, reader, &got);
        size_t len = 100000;
        wchar_t *s = malloc((len + 1) * sizeof *s);
        for (size_t i = 0; i < len; i++)
            s[i] = i % 2 ? L'\u00e9' : L'x'; /* 1.5 bytes each in UTF-8 */
        s[len] = 0;
        int c = fputwc(L'\u00f6', out);
        int r = fputws(s, out);
        int w = fwprintf(out, L"%ls %d\n", L"z\u00fcrich", 42);
        fclose(out);
        pthread_join(other, NULL);
        free(s);
        printf("fputwc %s, fputws %d, fwprintf %d: the reader got %zu bytes\n", c == L'\u00f6' ? "ok" : "failed", r, w, got);
    } else {
        return 2;
    }
    done = 1;
    pthread_join(tick, NULL);
    printf("the ticker %s\n", ticks >= 5 ? "ticked meanwhile" : "stood still");
    return 0;
}
