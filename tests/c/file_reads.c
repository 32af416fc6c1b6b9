/*
 * file_reads: regular-file reads under a cooperative runtime.
 *
 * usage: file_reads PATH MODE
 *   MODE cached  read PATH (already in the page cache) 200 times with read()
 *                and pread(); prints checksums; stderr ns_per_pass=<n>.
 *   MODE cold    a ticker thread ticks every 10 ms while the main thread
 *                drops PATH from the page cache (posix_fadvise DONTNEED) and
 *                reads its first 16 MiB with ONE read() (the disk wait is
 *                the potential stall, not CPU work), then fsyncs a scratch
 *                file; prints a checksum of what it read and that the ticker
 *                ran; stderr: the ticker's report (ticker.h).
 *   MODE direct  from a thread while another lives: writes PATH.direct
 *                opened O_DIRECT (36 aligned 4 KiB blocks by pwrite, write
 *                and writev), reads every block back (pread, read, readv)
 *                and checks it; prints what it did, or that the filesystem
 *                takes no O_DIRECT. Every call waits for the device.
 *   MODE partial from a thread while another lives, 8 times for each of
 *                read, pread, readv and preadv: drops PATH from the page
 *                cache, reads its first 4 KiB back into it, then reads
 *                1 MiB from offset 0 in ONE call (only its start cached);
 *                prints each call's count (a blocking read of a regular
 *                file is never short before its end), the file offset
 *                after it, and a checksum.
 *   MODE stdio   reads PATH through stdio (fgets, fread, getline, fgetc),
 *                first from main with no other thread, then from a thread
 *                while another lives; prints what each read.
 *
 * stdout is deterministic (checksums, counts).
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ticker.h"

static unsigned long sum_fd(int fd, int use_pread)
{
    static char buf[1 << 16];
    unsigned long s = 0;
    off_t off = 0;
    for (;;) {
        ssize_t n = use_pread ? pread(fd, buf, sizeof buf, off) : read(fd, buf, sizeof buf);
        if (n < 0) {
            perror("read");
            exit(1);
        }
        if (n == 0)
            break;
        off += n;
        for (ssize_t i = 0; i < n; i++)
            s = s * 31 + (unsigned char)buf[i];
    }
    return s;
}

/* One pass over PATH with each stdio reader. */
static void stdio_pass(const char *path, const char *who)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror("fopen");
        exit(1);
    }
    char line[64];
    unsigned long sum = 0, lines = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        for (char *c = line; *c; c++)
            sum = sum * 31 + (unsigned char)*c;
    }
    printf("%s fgets: pieces=%lu sum=%lx eof=%d\n", who, lines, sum, feof(f));
    rewind(f);
    char buf[1000];
    size_t got = 0, n;
    sum = 0;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        got += n;
        for (size_t i = 0; i < n; i++)
            sum = sum * 31 + buf[i];
    }
    printf("%s fread: bytes=%zu sum=%lx\n", who, got, sum);
    rewind(f);
    char *l = NULL;
    size_t cap = 0;
    ssize_t r;
    lines = 0;
    while ((r = getline(&l, &cap, f)) >= 0)
        lines++;
    free(l);
    printf("%s getline: lines=%lu\n", who, lines);
    rewind(f);
    long c, chars = 0;
    while ((c = fgetc(f)) != EOF)
        chars++;
    char one[1];
    printf("%s fgetc: chars=%ld fgets_n1=%s\n", who, chars, fgets(one, 1, f) ? "ptr" : "NULL");
    fclose(f);
}

static const char *stdio_path;

static void *stdio_thread(void *arg)
{
    (void)arg;
    stdio_pass(stdio_path, "thread");
    return NULL;
}

static void *idle_thread(void *arg)
{
    (void)arg;
    usleep(50000);
    return NULL;
}

/* Runs f in a thread while another thread lives (so that, under the
 * preload, f's calls are made where other fibers could run). */
static void beside_idle(void *(*f)(void *))
{
    pthread_t idle, t;
    pthread_create(&idle, NULL, idle_thread, NULL);
    pthread_create(&t, NULL, f, NULL);
    pthread_join(t, NULL);
    pthread_join(idle, NULL);
}

#define BLK 4096
static const char *direct_path;

/* Block i of the direct file holds the byte i + 1. */
static int block_ok(const unsigned char *b, int i)
{
    for (int k = 0; k < BLK; k++)
        if (b[k] != (unsigned char)(i + 1))
            return 0;
    return 1;
}

static void *direct_thread(void *arg)
{
    (void)arg;
    char name[4096];
    snprintf(name, sizeof name, "%s.direct", direct_path);
    int fd = open(name, O_CREAT | O_TRUNC | O_RDWR | O_DIRECT, 0600);
    if (fd < 0) {
        printf("direct: this filesystem takes no O_DIRECT\n");
        return NULL;
    }
    unsigned char *b;
    if (posix_memalign((void **)&b, BLK, 2 * BLK) != 0)
        abort();
    int wrong = 0;
    for (int i = 0; i < 16; i++) { /* blocks 0-15: pwrite */
        memset(b, i + 1, BLK);
        wrong += pwrite(fd, b, BLK, (off_t)i * BLK) != BLK;
    }
    lseek(fd, 16 * BLK, SEEK_SET);
    for (int i = 16; i < 28; i++) { /* blocks 16-27: write */
        memset(b, i + 1, BLK);
        wrong += write(fd, b, BLK) != BLK;
    }
    for (int i = 28; i < 36; i += 2) { /* blocks 28-35: writev, two at a time */
        memset(b, i + 1, BLK);
        memset(b + BLK, i + 2, BLK);
        struct iovec v[2] = {{b, BLK}, {b + BLK, BLK}};
        wrong += writev(fd, v, 2) != 2 * BLK;
    }
    for (int i = 0; i < 36; i++) { /* every block by pread */
        memset(b, 0, BLK);
        wrong += pread(fd, b, BLK, (off_t)i * BLK) != BLK || !block_ok(b, i);
    }
    lseek(fd, 0, SEEK_SET);
    for (int i = 0; i < 36; i += 2) { /* by read, then readv */
        if (i < 18) {
            wrong += read(fd, b, BLK) != BLK || !block_ok(b, i);
            wrong += read(fd, b, BLK) != BLK || !block_ok(b, i + 1);
        } else {
            struct iovec v[2] = {{b, BLK}, {b + BLK, BLK}};
            wrong += readv(fd, v, 2) != 2 * BLK || !block_ok(b, i) || !block_ok(b + BLK, i + 1);
        }
    }
    close(fd);
    unlink(name);
    free(b);
    printf("direct: 36 blocks written (pwrite, write, writev) and read back (pread, read, readv), %d wrong\n",
           wrong);
    return NULL;
}

static const char *partial_path;

static void *partial_thread(void *arg)
{
    (void)arg;
    int fd = open(partial_path, O_RDONLY);
    if (fd < 0) {
        perror("open");
        exit(1);
    }
    size_t len = 1 << 20;
    unsigned char *b = malloc(len), head[4096];
    const char *how[] = {"read", "pread", "readv", "preadv"};
    for (int k = 0; k < 4; k++) {
        int short_reads = 0;
        unsigned long s = 0;
        for (int i = 0; i < 8; i++) {
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            if (pread(fd, head, sizeof head, 0) != (ssize_t)sizeof head)
                exit(1);
            memset(b, 0, len);
            lseek(fd, 0, SEEK_SET);
            struct iovec v[2] = {{b, len / 4}, {b + len / 4, len - len / 4}};
            ssize_t n = k == 0 ? read(fd, b, len)
                      : k == 1 ? pread(fd, b, len, 0)
                      : k == 2 ? readv(fd, v, 2)
                               : preadv(fd, v, 2, 0);
            off_t at = lseek(fd, 0, SEEK_CUR);
            if (n != (ssize_t)len || at != (k & 1 ? 0 : (off_t)len))
                short_reads++;
            for (size_t j = 0; j < len; j += 512)
                s = s * 31 + b[j];
        }
        printf("partial %s: %d short of 8, checksum=%lx\n", how[k], short_reads, s);
    }
    free(b);
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: file_reads PATH cached|cold|partial|stdio|direct\n");
        return 2;
    }
    const char *path = argv[1];
    if (!strcmp(argv[2], "direct")) {
        direct_path = path;
        beside_idle(direct_thread);
        return 0;
    }
    if (!strcmp(argv[2], "partial")) {
        partial_path = path;
        beside_idle(partial_thread);
        return 0;
    }
    if (!strcmp(argv[2], "stdio")) {
        stdio_pass(path, "main");
        stdio_path = path;
        beside_idle(stdio_thread);
        return 0;
    }
    if (!strcmp(argv[2], "cached")) {
        int fd = open(path, O_RDONLY);
        if (fd < 0) {
            perror("open");
            return 1;
        }
        unsigned long first = sum_fd(fd, 0);
        long long t0 = now_ns();
        long reads = 0;
        for (int i = 0; i < 200; i++) {
            lseek(fd, 0, SEEK_SET);
            if (sum_fd(fd, i & 1) != first) {
                fprintf(stderr, "checksum changed\n");
                return 1;
            }
            reads++;
        }
        printf("cached: checksum=%lx reads=%ld\n", first, reads);
        fprintf(stderr, "ns_per_pass=%lld\n", (now_ns() - t0) / reads);
        return 0;
    }
    pthread_t t = ticker_start();
    usleep(30000);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        perror("open");
        return 1;
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    size_t len = 16 << 20;
    unsigned char *big = malloc(len);
    ssize_t got = 0;
    while ((size_t)got < len) { /* a short read is allowed: keep going */
        ssize_t n = read(fd, big + got, len - got);
        if (n <= 0)
            break;
        got += n;
    }
    unsigned long s = 0;
    for (ssize_t i = 0; i < got; i += 4096)
        s = s * 31 + big[i];
    free(big);
    char scratch[] = "/tmp/greenhook-fsync-XXXXXX";
    int w = mkstemp(scratch);
    if (w < 0 || write(w, "x", 1) != 1 || fsync(w) != 0 || fdatasync(w) != 0) {
        perror("scratch");
        return 1;
    }
    close(w);
    unlink(scratch);
    usleep(30000);
    long ticks = ticker_stop(t);
    printf("cold: bytes=%zd checksum=%lx ticker_ran=%s\n", got, s, ticks > 0 ? "yes" : "no");
    return 0;
}
