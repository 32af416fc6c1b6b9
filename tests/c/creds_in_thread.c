/*
 * creds_in_thread: the setxid family (setuid, setgid, seteuid, setegid,
 * setreuid, setregid, setresuid, setresgid, setgroups, initgroups) called
 * in a thread once the process has threads, each case in a child of its
 * own. glibc makes these calls on every thread of the process; the result
 * is read back in the main thread, and in every task of /proc/self/task
 * (an OS thread left with the old credentials would show there: before
 * the call two threads contend for a file lock, which under the preload
 * puts the waiting one's flock on a worker thread of greenhook's pool, a
 * real thread that glibc must reach too).
 *
 * Under the preload every case killed the process with signal 33 (glibc's
 * internal SIGSETXID): glibc took the OS thread's descriptor for another
 * thread than the calling fiber and signalled it, with no handler
 * installed.
 *
 * As root, the calls drop to another user and group; otherwise they set
 * what is already set (and setgroups/initgroups fail with EPERM, as they
 * should).
 *
 * stdout: the same with and without the preload.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *what;
static uid_t to_uid;
static gid_t to_gid;

static void *call(void *arg)
{
    (void)arg;
    int r = -2;
    if (strcmp(what, "setuid") == 0)
        r = setuid(to_uid);
    else if (strcmp(what, "setgid") == 0)
        r = setgid(to_gid);
    else if (strcmp(what, "seteuid") == 0)
        r = seteuid(to_uid);
    else if (strcmp(what, "setegid") == 0)
        r = setegid(to_gid);
    else if (strcmp(what, "setreuid") == 0)
        r = setreuid(to_uid, to_uid);
    else if (strcmp(what, "setregid") == 0)
        r = setregid(to_gid, to_gid);
    else if (strcmp(what, "setresuid") == 0)
        r = setresuid(to_uid, to_uid, to_uid);
    else if (strcmp(what, "setresgid") == 0)
        r = setresgid(to_gid, to_gid, to_gid);
    else if (strcmp(what, "setgroups") == 0)
        r = setgroups(1, &to_gid);
    else if (strcmp(what, "initgroups") == 0) {
        struct passwd *pw = getpwuid(to_uid);
        r = initgroups(pw ? pw->pw_name : "root", to_gid);
    }
    printf("  %s: %d%s%s\n", what, r, r == 0 ? "" : " ", r == 0 ? "" : strerror(errno));
    return NULL;
}

static int lock_fd;

/* Takes the lock main holds, through an open file description of its
 * own (a flock on main's would not wait). */
static void *locker(void *arg)
{
    (void)arg;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", lock_fd);
    int fd = open(path, O_RDONLY);
    flock(fd, LOCK_EX);
    flock(fd, LOCK_UN);
    close(fd);
    return NULL;
}

/* What every task of the process has on its Uid:, Gid: and Groups: lines,
 * if they all have the same; "tasks differ" otherwise. */
static void tasks(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) {
        printf("  no /proc/self/task\n");
        return;
    }
    char first[512] = "", line[256], path[300];
    int differ = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        char these[512] = "";
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "Uid:", 4) == 0 || strncmp(line, "Gid:", 4) == 0 ||
                strncmp(line, "Groups:", 7) == 0)
                strncat(these, line, sizeof these - strlen(these) - 1);
        fclose(f);
        if (!first[0])
            strcpy(first, these);
        else if (strcmp(first, these) != 0)
            differ = 1;
    }
    closedir(d);
    if (differ)
        printf("  tasks differ\n");
    else
        for (char *l = strtok(first, "\n"); l; l = strtok(NULL, "\n"))
            printf("  every task: %s\n", l);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    int root = geteuid() == 0;
    to_uid = root ? 65534 : getuid();
    to_gid = root ? 65534 : getgid();
    static const char *calls[] = {"setuid",   "setgid",    "seteuid",   "setegid",   "setreuid",
                                  "setregid", "setresuid", "setresgid", "setgroups", "initgroups"};
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
        what = calls[i];
        printf("%s:\n", what);
        pid_t pid = fork();
        if (pid == 0) {
            pthread_t t;
            /* A thread waits for a lock main holds first (the process has
             * had two threads, and under the preload a worker). */
            char path[] = "/tmp/creds_in_thread.XXXXXX";
            int fd = mkstemp(path);
            unlink(path);
            flock(fd, LOCK_EX);
            lock_fd = fd;
            pthread_create(&t, NULL, locker, NULL);
            usleep(50 * 1000);
            flock(fd, LOCK_UN);
            pthread_join(t, NULL);
            pthread_create(&t, NULL, call, NULL);
            pthread_join(t, NULL);
            uid_t ru, eu, su;
            gid_t rg, eg, sg;
            getresuid(&ru, &eu, &su);
            getresgid(&rg, &eg, &sg);
            printf("  main: uids %d %d %d, gids %d %d %d\n", (int)ru, (int)eu, (int)su, (int)rg, (int)eg, (int)sg);
            tasks();
            exit(0);
        }
        int status;
        waitpid(pid, &status, 0);
        if (WIFSIGNALED(status))
            printf("  killed by signal %d\n", WTERMSIG(status));
        else
            printf("  exited %d\n", WEXITSTATUS(status));
    }
    return 0;
}
