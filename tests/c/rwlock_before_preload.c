/*
 * rwlock_before_preload: rwlocks that glibc's own functions used before
 * greenhook's constructor ran, then used by threads.
 *
 * usage: rwlock_before_preload
 *
 * A function in the program's .preinit_array runs before every library's
 * constructor, greenhook's included, as a library's constructor that runs
 * before it does (libisc's sets OpenSSL up): the hooks still pass the calls
 * on to glibc then. glibc's write unlock leaves its lock in its write phase
 * (1 in the first word, 1 in the third), which greenhook's own words read
 * as one reader holding it: the next write lock waited for good (BIND's
 * `named` hung at start in OpenSSL's EVP_KEYMGMT_fetch).
 *
 * stdout: what the calls answered and the counts, the same with and
 * without the preload.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_rwlock_t written = PTHREAD_RWLOCK_INITIALIZER;
static pthread_rwlock_t read_only = PTHREAD_RWLOCK_INITIALIZER;
static pthread_rwlock_t for_try = PTHREAD_RWLOCK_INITIALIZER;
static long counter;

static void early(void)
{
    pthread_rwlock_wrlock(&written);
    pthread_rwlock_unlock(&written);
    pthread_rwlock_rdlock(&read_only);
    pthread_rwlock_unlock(&read_only);
    pthread_rwlock_wrlock(&for_try);
    pthread_rwlock_unlock(&for_try);
}

__attribute__((section(".preinit_array"), used)) static void (*const run_early)(void) = early;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 50; i++) {
        pthread_rwlock_wrlock(&written);
        long c = counter;
        usleep(50);
        counter = c + 1;
        pthread_rwlock_unlock(&written);
        pthread_rwlock_rdlock(&written);
        usleep(20);
        pthread_rwlock_unlock(&written);
        pthread_rwlock_rdlock(&read_only);
        pthread_rwlock_unlock(&read_only);
    }
    return NULL;
}

int main(void)
{
    /* A reader first, then a try: neither may find the lock taken. */
    int rd = pthread_rwlock_tryrdlock(&for_try);
    int un = pthread_rwlock_unlock(&for_try);
    int wr = pthread_rwlock_trywrlock(&for_try);
    int un2 = pthread_rwlock_unlock(&for_try);
    printf("tryrdlock %d, unlock %d, trywrlock %d, unlock %d\n", rd, un, wr, un2);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    int w = pthread_rwlock_trywrlock(&written);
    printf("counter %ld, then trywrlock %d\n", counter, w);
    return 0;
}
