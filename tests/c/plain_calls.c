/*
 * plain_calls: one pass over many hooked libc calls, used the plainest way
 * (stdio on a regular file, read/pread/readv, poll and select on a ready
 * pipe, popen, system, the sleeps, a timed condvar wait, a semaphore,
 * getaddrinfo, a socketpair, dprintf). The shim must answer exactly as
 * glibc, from main with no other thread (where most hooks pass through)
 * and from a thread while another lives (where they go through the hub).
 *
 * usage: plain_calls main|thread
 * stdout: one line per call (deterministic).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <fcntl.h>
#include <poll.h>
#include <time.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <netdb.h>
static int run_all(void)
{
  char path[] = "/tmp/gh-smoke-XXXXXX"; int fd = mkstemp(path);
  FILE *f = fdopen(fd, "w+"); fprintf(f, "alpha 1\nbeta 2\n"); fputs("gamma 3\n", f); fputc('z', f); fwrite("\n", 1, 1, f); fflush(f);
  rewind(f); char line[64]; while (fgets(line, sizeof line, f)) printf("fgets: %s", line);
  rewind(f); char w[16]; int v; int k = fscanf(f, "%15s %d", w, &v); printf("fscanf: %d %s %d\n", k, w, v);
  rewind(f); char *l = NULL; size_t cap = 0; ssize_t r; while ((r = getdelim(&l, &cap, ' ', f)) > 0) printf("getdelim %zd\n", r); free(l);
  rewind(f); char big[100]; size_t n = fread(big, 1, sizeof big, f); printf("fread %zu\n", n);
  fclose(f);
  int rfd = open(path, O_RDONLY); n = read(rfd, big, 5); ssize_t pn = pread(rfd, big, 5, 6); printf("read %zu pread %zd\n", n, pn);
  struct iovec iv[2] = { { big, 3 }, { big + 3, 3 } }; printf("readv %zd\n", readv(rfd, iv, 2)); close(rfd); unlink(path);
  int p[2]; pipe(p); write(p[1], "hello", 5); struct pollfd pf = { p[0], POLLIN, 0 }; int pr = poll(&pf, 1, 10); printf("poll %d %x\n", pr, pf.revents);
  fd_set rs; FD_ZERO(&rs); FD_SET(p[0], &rs); struct timeval tv = { 0, 10000 }; printf("select %d\n", select(p[0] + 1, &rs, NULL, NULL, &tv));
  n = read(p[0], big, 10); printf("pipe read %zu\n", n); close(p[0]); close(p[1]);
  FILE *pp = popen("echo from-popen", "r"); printf("popen: %s", fgets(line, sizeof line, pp) ? line : "NULL\n"); printf("pclose %d\n", pclose(pp));
  printf("system %d\n", system("true"));
  struct timespec ts = { 0, 1000000 }; int ns = nanosleep(&ts, NULL); int us = usleep(1000); unsigned sl = sleep(0); printf("nanosleep %d usleep %d sleep %u\n", ns, us, sl);
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER; pthread_cond_t c = PTHREAD_COND_INITIALIZER; pthread_mutex_lock(&m);
  struct timespec dl; clock_gettime(CLOCK_REALTIME, &dl); dl.tv_nsec += 5000000; if (dl.tv_nsec >= 1000000000) { dl.tv_sec++; dl.tv_nsec -= 1000000000; }
  printf("cond_timedwait %s\n", strerrorname_np(pthread_cond_timedwait(&c, &m, &dl))); pthread_mutex_unlock(&m);
  sem_t s; sem_init(&s, 0, 1); int sw = sem_wait(&s); int st = sem_trywait(&s); printf("sem_wait %d trywait %d\n", sw, st);
  struct addrinfo *ai; int g = getaddrinfo("localhost", "80", NULL, &ai); printf("getaddrinfo %d\n", g); if (!g) freeaddrinfo(ai);
  int sv[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, sv); send(sv[0], "ping", 4, 0); n = recv(sv[1], big, 10, 0); printf("recv %zu\n", n);
  dprintf(sv[0], "dp %d\n", 42); n = read(sv[1], big, 10); printf("dprintf->read %zu\n", n);
  puts("puts ok");
  fflush(stdout);
  return 0;
}

static void *idle(void *a)
{
    usleep(500000);
    return a;
}

static void *body(void *a)
{
    run_all();
    return a;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 1 && !strcmp(argv[1], "thread")) {
        pthread_t i, b;
        pthread_create(&i, NULL, idle, NULL);
        pthread_create(&b, NULL, body, NULL);
        pthread_join(b, NULL);
        pthread_join(i, NULL);
        return 0;
    }
    return run_all();
}
