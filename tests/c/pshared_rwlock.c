/*
 * pshared_rwlock: process-shared rwlocks: writers and readers in a parent and its
 * child (try, timed and blocking locks; a writer's relock is EDEADLK, another
 * thread of its process gets no EDEADLK), and readers and a writer of one
 * process.
 *
 * usage and output: see pshared.h.
 */
#define _GNU_SOURCE
#include "pshared.h"

/* ---------- rwlock: writers and readers in two processes ---------- */

static void rwlock_child(void)
{
    struct timespec t = in_ms(100);
    S->codes[0] = pthread_rwlock_tryrdlock(&S->rw);
    S->codes[1] = pthread_rwlock_trywrlock(&S->rw);
    S->codes[2] = pthread_rwlock_timedrdlock(&S->rw, &t);
    atomic_store(&S->ready, 1);
    S->codes[3] = pthread_rwlock_rdlock(&S->rw); /* until the parent unlocks */
    atomic_store(&S->ready, 2);
    while (atomic_load(&S->ready) != 3) /* the parent read-locks too */
        msleep(1);
    S->codes[4] = pthread_rwlock_unlock(&S->rw);
    S->codes[5] = pthread_rwlock_wrlock(&S->rw); /* until the parent unlocks */
    S->codes[6] = pthread_rwlock_wrlock(&S->rw);
    S->codes[7] = pthread_rwlock_rdlock(&S->rw);
    S->counter = 7;
    S->codes[8] = pthread_rwlock_unlock(&S->rw);
}

/* Another thread of the writer's process gets no EDEADLK. */
static void *rwlock_sibling(void *arg)
{
    (void)arg;
    struct timespec t = in_ms(50);
    int a = pthread_rwlock_tryrdlock(&S->rw);
    int b = pthread_rwlock_timedwrlock(&S->rw, &t);
    t = in_ms(50);
    int c = pthread_rwlock_timedrdlock(&S->rw, &t);
    result("sibling of the writer: %s %s %s", en(a), en(b), en(c));
    return NULL;
}

static void check_rwlock(void)
{
    shared_new();
    rwlock_init(&S->rw);
    EXPECT_EQ("wrlock", pthread_rwlock_wrlock(&S->rw), 0);
    int relock = pthread_rwlock_wrlock(&S->rw);
    int rd = pthread_rwlock_rdlock(&S->rw);
    join(spawn(rwlock_sibling, NULL));
    pid_t pid = child(rwlock_child);
    await_ready(1);
    msleep(50);
    EXPECT_EQ("unlock", pthread_rwlock_unlock(&S->rw), 0);
    while (atomic_load(&S->ready) != 2)
        msleep(1);
    EXPECT_EQ("rdlock beside the child", pthread_rwlock_rdlock(&S->rw), 0);
    atomic_store(&S->ready, 3);
    msleep(50); /* the child waits for its write lock now */
    EXPECT_EQ("unlock read", pthread_rwlock_unlock(&S->rw), 0);
    reap_ok(pid);
    result("owner relock %s %s; child: %s %s %s, %s %s, write %s, relock %s %s, unlock %s, saw %ld", en(relock),
           en(rd), en(S->codes[0]), en(S->codes[1]), en(S->codes[2]), en(S->codes[3]), en(S->codes[4]),
           en(S->codes[5]), en(S->codes[6]), en(S->codes[7]), en(S->codes[8]), S->counter);
}

/* ---------- one_process: used by the threads of one process alone ---------- */

static void *one_reader(void *arg)
{
    (void)arg;
    EXPECT_EQ("rdlock", pthread_rwlock_rdlock(&S->rw), 0);
    atomic_fetch_add(&S->ready, 1);
    msleep(50);
    __atomic_fetch_add(&S->counter, 1, __ATOMIC_SEQ_CST);
    EXPECT_EQ("unlock", pthread_rwlock_unlock(&S->rw), 0);
    return NULL;
}

static void check_one_process(void)
{
    shared_new();
    rwlock_init(&S->rw);
    pthread_t t[2] = { spawn(one_reader, NULL), spawn(one_reader, NULL) };
    while (atomic_load(&S->ready) < 2)
        msleep(1);
    int w = pthread_rwlock_trywrlock(&S->rw);
    int r = pthread_rwlock_wrlock(&S->rw); /* until both readers leave */
    long seen = S->counter;
    pthread_rwlock_unlock(&S->rw);
    join(t[0]);
    join(t[1]);
    int d = pthread_rwlock_destroy(&S->rw);
    result("trywrlock beside readers %s, wrlock %s after %ld readers left, destroy %s", en(w), en(r), seen, en(d));
}

static const struct check checks[] = {
    { "rwlock", check_rwlock },
    { "one_process", check_one_process },
};

int main(int argc, char **argv)
{
    return pshared_main(argc, argv, checks, sizeof checks / sizeof checks[0]);
}
