/* pshared_cond_owner [TYPE [timeout]]: a process-shared recursive
 * (default) or error-checking mutex (TYPE 1 or 2) and condvar between two
 * threads. The child locks and waits; the parent polls with unlock,
 * sched_yield, lock until the child waits, then signals and unlocks. With
 * "timeout" the child's wait is a timed wait whose time has passed: it
 * re-locks the mutex and returns at once, and the parent's lock, which
 * comes meanwhile, must wait for the child's unlock. Each call's answer goes
 * to stdout: the parent's lock right after the child began its wait must
 * wait for the mutex (not take it as a relock of its own), and its unlock
 * must succeed. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sched.h>
#include <stdlib.h>
#include <errno.h>
#include <time.h>
typedef struct { pthread_mutex_t m; pthread_cond_t c; volatile int ctrl, go, parent_holds, overlap; } td_t;
static td_t *td;
static int rc[4];
static int timed;
static void *tf(void *a) {
  (void)a;
  int r = pthread_mutex_lock(&td->m); rc[0] = r;
  td->ctrl = 1;
  if (timed) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec -= 1; /* already past: release, re-lock, ETIMEDOUT */
    r = pthread_cond_timedwait(&td->c, &td->m, &ts);
    td->overlap |= td->parent_holds;
    td->ctrl = 2;
    if (r == ETIMEDOUT) r = 0;
  } else {
    do { r = pthread_cond_wait(&td->c, &td->m); td->ctrl = 2; } while (r == 0 && !td->go);
  }
  rc[1] = r;
  r = pthread_mutex_trylock(&td->m); rc[2] = r;
  if (r == 0) pthread_mutex_unlock(&td->m);
  r = pthread_mutex_unlock(&td->m); rc[3] = r;
  return 0;
}
int main(int argc, char **argv) {
  int type = argc > 1 ? atoi(argv[1]) : PTHREAD_MUTEX_RECURSIVE;
  timed = argc > 2 && strcmp(argv[2], "timeout") == 0;
  setvbuf(stdout, NULL, _IONBF, 0);
  td = mmap(0, 4096, PROT_READ|PROT_WRITE, MAP_SHARED|MAP_ANONYMOUS, -1, 0);
  pthread_mutexattr_t ma; pthread_condattr_t ca;
  pthread_mutexattr_init(&ma); pthread_mutexattr_settype(&ma, type);
  pthread_mutexattr_setpshared(&ma, 1); pthread_condattr_init(&ca); pthread_condattr_setpshared(&ca, 1);
  pthread_mutex_init(&td->m, &ma); pthread_cond_init(&td->c, &ca);
  pthread_t t; pthread_create(&t, 0, tf, 0);
  int r = pthread_mutex_lock(&td->m); printf("parent lock %d\n", r);
  while (td->ctrl == 0) { r = pthread_mutex_unlock(&td->m); if (r) printf("parent unlock-in-loop %d\n", r); sched_yield(); r = pthread_mutex_lock(&td->m); if (r) printf("parent lock-in-loop %d\n", r);}
  if (timed) {
    td->parent_holds = 1;
    usleep(50000);
    td->parent_holds = 0;
  } else {
    r = pthread_cond_signal(&td->c); printf("parent signal %d\n", r);
    usleep(100000);
  }
  td->go = 1;
  r = pthread_mutex_unlock(&td->m); printf("parent unlock %d\n", r);
  pthread_join(t, 0);
  printf("child lock %d\nchild wait %d\nchild trylock %d\nchild unlock %d\n", rc[0], rc[1], rc[2], rc[3]);
  if (timed) printf("the child's wait returned while the parent held the mutex: %s\n", td->overlap ? "yes" : "no");
  r = pthread_mutex_destroy(&td->m); printf("destroy %d\n", r);
  return 0;
}
