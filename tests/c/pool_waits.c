/*
 * pool_waits: more threads waiting at once, in calls epoll cannot watch,
 * than greenhook's offload pool has workers (GREENHOOK_POOL_SIZE, 4 by
 * default), and a call the waits depend on made while they all wait.
 * Natively every thread waits on its own. A pool that queues a wait behind
 * the others deadlocks here: the waits end only once main has done the
 * later call, and that call is queued behind them.
 *
 * usage: pool_waits MODE [N]   (N waiting threads, default 8)
 *   flock    the threads wait for a flock main holds; main then looks up
 *            "localhost" (getaddrinfo, run on the pool) and unlocks
 *   msgrcv   each thread waits for its own System V message type; main
 *            looks up "localhost", then sends one message, to the last
 *            thread, and each thread that gets its message sends the next
 *            one down: a chain through every waiter
 *   mixed    N/3 threads of each: a flock, a System V semaphore (semop)
 *            and a message; main looks up "localhost", sends the chain's
 *            first message, then waits for one more flock (of another
 *            file, which a child process holds for 100 ms) before it
 *            releases the semaphore
 *
 * stdout: results (deterministic). stderr: the ticker's report (ticker.h).
 */
#define _GNU_SOURCE
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "ticker.h"

#define MAX 64

static const char *mode;
static int n;
static char path[64], path2[64];
static int msq, sem;
static _Atomic int got_lock, got_msg, got_sem;
struct msg { long type; char text[8]; };

static int open_lock(const char *p)
{
    int fd = open(p, O_RDWR | O_CREAT, 0600);
    if (fd < 0) {
        perror("open");
        exit(1);
    }
    return fd;
}

static void *lock_waiter(void *a)
{
    (void)a;
    int fd = open_lock(path); /* its own description: flocks exclude it */
    if (flock(fd, LOCK_EX)) {
        perror("flock");
        exit(1);
    }
    got_lock++;
    flock(fd, LOCK_UN);
    close(fd);
    return NULL;
}

/* Thread i waits for message type i+1, then sends type i (to thread i-1). */
static void *msg_waiter(void *a)
{
    long i = (long)a;
    struct msg m;
    if (msgrcv(msq, &m, sizeof m.text, i + 1, 0) < 0) {
        perror("msgrcv");
        exit(1);
    }
    got_msg++;
    if (i > 0) {
        m.type = i;
        if (msgsnd(msq, &m, sizeof m.text, 0)) {
            perror("msgsnd");
            exit(1);
        }
    }
    return NULL;
}

static void *sem_waiter(void *a)
{
    (void)a;
    struct sembuf op = {.sem_num = 0, .sem_op = -1};
    if (semop(sem, &op, 1)) {
        perror("semop");
        exit(1);
    }
    got_sem++;
    return NULL;
}

static void look_up(void)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo("localhost", "80", &hints, &res);
    printf("getaddrinfo(localhost) while %d threads wait: %s\n", n, rc == 0 ? "ok" : gai_strerror(rc));
    if (res)
        freeaddrinfo(res);
}

int main(int argc, char **argv)
{
    mode = argc > 1 ? argv[1] : "flock";
    n = argc > 2 ? atoi(argv[2]) : 8;
    if (n < 3 || n > MAX)
        return 2;
    snprintf(path, sizeof path, "/tmp/gh-pool-waits-%d", (int)getpid());
    snprintf(path2, sizeof path2, "/tmp/gh-pool-waits-%d.2", (int)getpid());
    msq = msgget(IPC_PRIVATE, 0600);
    sem = semget(IPC_PRIVATE, 1, 0600);
    if (msq < 0 || sem < 0) {
        perror("ipc");
        return 1;
    }
    int fd = open_lock(path);
    flock(fd, LOCK_EX);

    pthread_t tick = ticker_start();
    pthread_t t[MAX];
    int locks = 0, msgs = 0, sems = 0;
    for (int i = 0; i < n; i++) {
        void *(*f)(void *) = lock_waiter;
        if (!strcmp(mode, "msgrcv") || (!strcmp(mode, "mixed") && i % 3 == 1))
            f = msg_waiter;
        else if (!strcmp(mode, "mixed") && i % 3 == 2)
            f = sem_waiter;
        else if (strcmp(mode, "flock") && strcmp(mode, "mixed"))
            return 2;
        long arg = f == msg_waiter ? msgs : 0;
        locks += f == lock_waiter;
        msgs += f == msg_waiter;
        sems += f == sem_waiter;
        if (pthread_create(&t[i], NULL, f, (void *)arg))
            return 1;
    }
    usleep(100000); /* every thread is waiting now */
    look_up();

    if (msgs) {
        struct msg m = {.type = msgs};
        strcpy(m.text, "go");
        msgsnd(msq, &m, sizeof m.text, 0);
    }
    if (sems) {
        /* One more wait, on another file, held by a thread that itself
         * waits: the semaphore is released only once main has it. */
        int fd2 = open_lock(path2);
        int hold[2];
        if (pipe(hold))
            return 1;
        pid_t child = fork();
        if (child == 0) {
            int c = open_lock(path2);
            flock(c, LOCK_EX);
            if (write(hold[1], "k", 1) != 1)
                _exit(1);
            usleep(100000);
            _exit(0); /* its lock goes with it */
        }
        char c;
        if (read(hold[0], &c, 1) != 1)
            return 1;
        if (flock(fd2, LOCK_EX))
            return 1;
        printf("main got the second lock\n");
        waitpid(child, NULL, 0);
        struct sembuf op = {.sem_num = 0, .sem_op = sems};
        semop(sem, &op, 1);
    }
    flock(fd, LOCK_UN);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    ticker_stop(tick);
    printf("%s: %d got the lock of %d, %d their message of %d, %d the semaphore of %d\n", mode,
           (int)got_lock, locks, (int)got_msg, msgs, (int)got_sem, sems);
    msgctl(msq, IPC_RMID, NULL);
    semctl(sem, 0, IPC_RMID);
    unlink(path);
    unlink(path2);
    close(fd);
    return 0;
}
