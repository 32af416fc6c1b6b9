/* rwlock_kinds: who goes first when main holds a read lock, a writer
 * waits, and a new reader comes, for glibc's default (readers first) and
 * for PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP (a waiting writer keeps
 * new readers out). The order of acquisition goes to stdout. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static pthread_rwlock_t l;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static char order[8];

static void got(char who)
{
    pthread_mutex_lock(&m);
    order[strlen(order)] = who;
    pthread_mutex_unlock(&m);
}

static void *writer(void *arg)
{
    (void)arg;
    pthread_rwlock_wrlock(&l);
    got('W');
    pthread_rwlock_unlock(&l);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    int t = pthread_rwlock_tryrdlock(&l);
    if (t == 0)
        pthread_rwlock_unlock(&l);
    printf("  tryrdlock beside the waiting writer: %s\n", t == 0 ? "0" : t == 16 ? "EBUSY" : "other");
    pthread_rwlock_rdlock(&l);
    got('R');
    pthread_rwlock_unlock(&l);
    return NULL;
}

static void run(int kind, const char *name)
{
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, kind);
    pthread_rwlock_init(&l, &a);
    memset(order, 0, sizeof order);
    printf("%s:\n", name);
    pthread_rwlock_rdlock(&l);
    pthread_t w, r;
    pthread_create(&w, NULL, writer, NULL);
    usleep(50000); /* the writer waits */
    pthread_create(&r, NULL, reader, NULL);
    usleep(50000); /* the reader is in, or waits */
    got('M');      /* main lets go */
    pthread_rwlock_unlock(&l);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    printf("  order: %s\n", order);
    pthread_rwlock_destroy(&l);
}

int main(void)
{
    run(PTHREAD_RWLOCK_PREFER_READER_NP, "prefer reader");
    run(PTHREAD_RWLOCK_PREFER_WRITER_NP, "prefer writer (glibc: as reader)");
    run(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP, "prefer writer, nonrecursive");
    return 0;
}
