/*
 * gc_threads: a program on the Boehm-Demers-Weiser collector (libgc, as
 * Guile, w3m, Inkscape and GNU Objective-C use it) with threads. Eight
 * threads build and drop linked lists of collected objects, so that
 * collections run while they work: the collector stops every thread with
 * a signal and reads its stack, with its parallel markers (threads of its
 * own) on. Each thread's sum, then the total, and whether collections ran.
 *
 * Before greenhook's fix, the first thread crashed: libgc's thread start
 * pushes a cleanup handler, and greenhook's __sigsetjmp stub wrote a word
 * past the cleanup buffer.
 */
#define GC_THREADS
#include <gc/gc.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

struct node {
    struct node *next;
    long value;
};

static void *worker(void *arg)
{
    long id = (long)arg;
    long sum = 0;
    for (int round = 0; round < 300; round++) {
        struct node *head = NULL;
        for (int i = 0; i < 2000; i++) {
            struct node *n = GC_MALLOC(sizeof *n);
            n->next = head;
            n->value = i + id;
            head = n;
        }
        for (struct node *n = head; n; n = n->next)
            sum += n->value;
        if (round % 100 == 0)
            usleep(1000);
    }
    return (void *)sum;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    GC_INIT();
    pthread_t t[8];
    for (long i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    long total = 0;
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        printf("thread %d: %ld\n", i, (long)r);
        total += (long)r;
    }
    GC_gcollect();
    printf("total %ld, collections ran: %s\n", total, GC_get_gc_no() > 1 ? "yes" : "no");
    return 0;
}
