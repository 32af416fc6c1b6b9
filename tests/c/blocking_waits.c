/*
 * blocking_waits: waits that epoll cannot watch. MODE picks one; a waiter
 * thread blocks on something a peer (a thread, or a child process for
 * POSIX record locks, which are per process) releases after 150 ms (the
 * child: 300 ms), while
 * a ticker ticks every 10 ms. Unhooked under the shim, the waiter held the
 * hub and the peer thread never ran: a deadlock.
 *
 *   flock lockf setlkw ofd_setlkw msgrcv msgsnd semop semtimedop
 *   mq_receive mq_send msync
 *   splice tee vmsplice   on pipes/sockets the shim made non-blocking
 *                         underneath: must wait, not fail with EAGAIN
 *   bad          bad arguments: same return value and errno as unpatched
 *
 * stdout: results (deterministic). stderr: the ticker's report (ticker.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ticker.h"

static const char *mode;
static char path[64];
static int fd1, msq, sem;
static int sp[2], p1[2], p2[2];
static mqd_t mq;
static char mqname[64];
struct msg { long type; char text[16]; };

/* Releases whatever the waiter waits on, after 150 ms. */
static void *peer(void *a)
{
    (void)a;
    usleep(150000);
    if (!strcmp(mode, "flock"))
        flock(fd1, LOCK_UN);
    else if (!strcmp(mode, "ofd_setlkw")) {
        struct flock l = {.l_type = F_UNLCK, .l_whence = SEEK_SET};
        fcntl(fd1, F_OFD_SETLK, &l);
    } else if (!strcmp(mode, "msgrcv")) {
        struct msg m = {.type = 1};
        strcpy(m.text, "from peer");
        msgsnd(msq, &m, sizeof m.text, 0);
    } else if (!strcmp(mode, "msgsnd")) {
        struct msg m;
        msgrcv(msq, &m, sizeof m.text, 0, 0); /* makes room */
    } else if (!strcmp(mode, "semop") || !strcmp(mode, "semtimedop")) {
        struct sembuf up = {.sem_num = 0, .sem_op = 1};
        semop(sem, &up, 1);
    } else if (!strcmp(mode, "mq_receive"))
        mq_send(mq, "from peer", 10, 3);
    else if (!strcmp(mode, "mq_send")) {
        char buf[64];
        mq_receive(mq, buf, sizeof buf, NULL);
    } else if (!strcmp(mode, "splice")) {
        if (write(sp[1], "spliced!", 8) != 8)
            perror("write");
    } else if (!strcmp(mode, "tee")) {
        if (write(p1[1], "teed", 4) != 4)
            perror("write");
    } else if (!strcmp(mode, "vmsplice")) {
        static char sink[1 << 16];
        size_t got = 0;
        while (got < 4096) {
            ssize_t n = read(p1[0], sink, sizeof sink);
            if (n <= 0)
                break;
            got += n;
        }
    }
    return NULL;
}

static void *waiter(void *a)
{
    (void)a;
    long long t0 = now_ms();
    int r = 0;
    if (!strcmp(mode, "flock")) {
        int fd2 = open(path, O_RDWR);
        r = flock(fd2, LOCK_EX);
        close(fd2);
    } else if (!strcmp(mode, "lockf") || !strcmp(mode, "setlkw")) {
        int fd2 = open(path, O_RDWR);
        if (!strcmp(mode, "lockf"))
            r = lockf(fd2, F_LOCK, 0);
        else {
            struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
            r = fcntl(fd2, F_SETLKW, &l);
        }
        close(fd2);
    } else if (!strcmp(mode, "ofd_setlkw")) {
        int fd2 = open(path, O_RDWR);
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        r = fcntl(fd2, F_OFD_SETLKW, &l);
        close(fd2);
    } else if (!strcmp(mode, "msgrcv")) {
        struct msg m;
        r = (int)msgrcv(msq, &m, sizeof m.text, 0, 0);
        printf("msgrcv text [%s]\n", r > 0 ? m.text : "");
    } else if (!strcmp(mode, "msgsnd")) {
        struct msg m = {.type = 1};
        strcpy(m.text, "x");
        r = msgsnd(msq, &m, sizeof m.text, 0); /* the queue is full */
    } else if (!strcmp(mode, "semop")) {
        struct sembuf down = {.sem_num = 0, .sem_op = -1};
        r = semop(sem, &down, 1);
    } else if (!strcmp(mode, "semtimedop")) {
        struct sembuf down = {.sem_num = 0, .sem_op = -1};
        struct timespec t = {.tv_sec = 5};
        r = semtimedop(sem, &down, 1, &t);
    } else if (!strcmp(mode, "mq_receive")) {
        char buf[64];
        unsigned prio = 0;
        r = (int)mq_receive(mq, buf, sizeof buf, &prio);
        printf("mq_receive text [%s] prio %u\n", r > 0 ? buf : "", prio);
    } else if (!strcmp(mode, "mq_send")) {
        r = mq_send(mq, "second", 7, 1); /* the queue (maxmsg 1) is full */
    } else if (!strcmp(mode, "splice")) {
        r = (int)splice(sp[0], NULL, p1[1], NULL, 64, 0);
        char buf[16] = {0};
        if (r > 0 && read(p1[0], buf, r) != r)
            perror("read");
        printf("splice moved [%s]\n", buf);
    } else if (!strcmp(mode, "tee")) {
        r = (int)tee(p1[0], p2[1], 64, 0);
        char buf[16] = {0};
        if (r > 0 && read(p2[0], buf, r) != r)
            perror("read");
        printf("tee copied [%s]\n", buf);
    } else if (!strcmp(mode, "vmsplice")) {
        static char page[4096];
        memset(page, 'v', sizeof page);
        struct iovec iov = {.iov_base = page, .iov_len = sizeof page};
        r = (int)vmsplice(p1[1], &iov, 1, 0); /* the pipe is full */
    } else if (!strcmp(mode, "bad")) {
        struct sembuf down = {.sem_num = 0, .sem_op = -1};
        struct msg m;
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        int e[8], v[8];
        v[0] = flock(-1, LOCK_EX); e[0] = errno;
        v[1] = lockf(-1, F_LOCK, 0); e[1] = errno;
        v[2] = fcntl(-1, F_SETLKW, &l); e[2] = errno;
        v[3] = semop(-1, &down, 1); e[3] = errno;
        v[4] = (int)msgrcv(-1, &m, sizeof m.text, 0, 0); e[4] = errno;
        v[5] = mq_receive((mqd_t)-1, (char *)&m, sizeof m, NULL); e[5] = errno;
        v[6] = flock(fd1, 12345); e[6] = errno;
        v[7] = semop(sem, NULL, 1); e[7] = errno;
        for (int i = 0; i < 8; i++)
            printf("bad %d: %d %s\n", i, v[i], strerrorname_np(e[i]));
        return NULL;
    } else if (!strcmp(mode, "msync")) {
        char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd1, 0);
        p[0] = 'm';
        r = msync(p, 4096, MS_SYNC);
        int bad = msync(p + 1, 4096, MS_SYNC); /* unaligned: EINVAL */
        printf("msync unaligned %d %s\n", bad, strerrorname_np(errno));
        munmap(p, 4096);
        printf("%s returned %d\n", mode, r);
        return NULL;
    }
    long long waited = now_ms() - t0;
    printf("%s returned %d, waited for the peer: %s\n", mode, r, waited >= 100 ? "yes" : "NO");
    return NULL;
}

int main(int argc, char **argv)
{
    mode = argc > 1 ? argv[1] : "flock";
    snprintf(path, sizeof path, "/tmp/gh-blocking-%d", (int)getpid());
    fd1 = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd1 < 0 || ftruncate(fd1, 4096))
        return 1;
    pid_t child = -1;
    if (!strcmp(mode, "flock"))
        flock(fd1, LOCK_EX);
    else if (!strcmp(mode, "ofd_setlkw")) {
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        fcntl(fd1, F_OFD_SETLK, &l);
    } else if (!strcmp(mode, "lockf") || !strcmp(mode, "setlkw")) {
        /* Record locks are per process: a child holds it for 150 ms. */
        int ready[2];
        if (pipe(ready))
            return 1;
        child = fork();
        if (child == 0) {
            struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
            fcntl(fd1, F_SETLK, &l);
            if (write(ready[1], "k", 1) != 1)
                _exit(1);
            usleep(300000);
            _exit(0);
        }
        char c;
        if (read(ready[0], &c, 1) != 1)
            return 1;
    } else if (!strcmp(mode, "msgrcv") || !strcmp(mode, "msgsnd")) {
        msq = msgget(IPC_PRIVATE, 0600);
        if (!strcmp(mode, "msgsnd")) {
            struct msqid_ds ds;
            msgctl(msq, IPC_STAT, &ds);
            ds.msg_qbytes = 16; /* room for exactly one message */
            msgctl(msq, IPC_SET, &ds);
            struct msg m = {.type = 1};
            msgsnd(msq, &m, sizeof m.text, 0);
        }
    } else if (!strcmp(mode, "splice")) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) || pipe(p1))
            return 1;
    } else if (!strcmp(mode, "tee")) {
        if (pipe(p1) || pipe(p2))
            return 1;
    } else if (!strcmp(mode, "vmsplice")) {
        if (pipe(p1))
            return 1;
        /* Fill it (non-blocking for the filling only, then back). */
        int cap = fcntl(p1[1], F_GETPIPE_SZ);
        static char fill[1 << 16];
        int fl = fcntl(p1[1], F_GETFL);
        fcntl(p1[1], F_SETFL, fl | O_NONBLOCK);
        for (int left = cap; left > 0;) {
            ssize_t n = write(p1[1], fill, left);
            if (n <= 0)
                break;
            left -= n;
        }
        fcntl(p1[1], F_SETFL, fl);
    } else if (!strcmp(mode, "semop") || !strcmp(mode, "semtimedop") || !strcmp(mode, "bad"))
        sem = semget(IPC_PRIVATE, 1, 0600);
    else if (!strcmp(mode, "mq_receive") || !strcmp(mode, "mq_send")) {
        snprintf(mqname, sizeof mqname, "/gh-blocking-%d", (int)getpid());
        struct mq_attr at = {.mq_maxmsg = 1, .mq_msgsize = 64};
        mq = mq_open(mqname, O_CREAT | O_RDWR, 0600, &at);
        if (mq == (mqd_t)-1) {
            perror("mq_open");
            return 1;
        }
        if (!strcmp(mode, "mq_send"))
            mq_send(mq, "first", 6, 1);
    }

    pthread_t t = ticker_start(), w, p;
    pthread_create(&w, NULL, waiter, NULL);
    pthread_create(&p, NULL, peer, NULL);
    pthread_join(w, NULL);
    pthread_join(p, NULL);
    ticker_stop(t);
    if (child > 0)
        waitpid(child, NULL, 0);
    if (msq)
        msgctl(msq, IPC_RMID, NULL);
    if (sem)
        semctl(sem, 0, IPC_RMID);
    if (mqname[0])
        mq_unlink(mqname);
    unlink(path);
    return 0;
}
