/*
 * tls_cxx: C++ `thread_local` objects with constructors and destructors
 * (issue 10). Each of 6 threads touches `thread_local A a`, sleeps 20 ms
 * (usleep: the others run), then touches `thread_local B b` and returns.
 * Each object's constructor and destructor append a letter to the thread's
 * log (a, b; B, A), in the thread's own `thread_local int t_id` slot.
 * Destructors run at the thread's exit, in reverse order of construction,
 * on the thread itself (t_id is still its own), before its join returns.
 * main's own objects are destroyed at exit.
 *
 * stdout: "thread N: abBA" for each thread, then "main: ab", then (at
 * exit) "main at exit: abBA".
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char g_log[8][8];
static thread_local int t_id;

static void note(char c)
{
    char *l = g_log[t_id];
    size_t n = strlen(l);
    if (n + 1 < sizeof g_log[0])
        l[n] = c;
}

static volatile int g_sink;

struct A {
    int x = 1;
    A() { note('a'); }
    ~A()
    {
        note('A');
        if (t_id == 7)
            printf("main at exit: %s\n", g_log[7]);
    }
};

struct B {
    int x = 2;
    B() { note('b'); }
    ~B() { note('B'); }
};

static thread_local A a;
static thread_local B b;

static void *run(void *arg)
{
    t_id = (int)(long)arg;
    g_sink = a.x;
    usleep(20000);
    g_sink = b.x;
    return nullptr;
}

int main()
{
    alarm(20);
    pthread_t t[6];
    for (long i = 0; i < 6; i++)
        pthread_create(&t[i], nullptr, run, (void *)i);
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], nullptr);
        printf("thread %d: %s\n", i, g_log[i]);
    }
    t_id = 7;
    g_sink = a.x;
    g_sink = b.x;
    printf("main: %s\n", g_log[7]);
    fflush(stdout);
    return 0;
}
