/*
 * launcher_probe: shows what `greenhook run` handed to the program.
 *
 * usage: launcher_probe [STATUS [ARGS...]]
 *   STATUS  the exit status (default 0)
 *
 * stdout:
 *   arg[<i>]=<argv[i]>              for every argument, i >= 1
 *   argc=<argc>
 *   env <NAME>=<value>              for every GREENHOOK_* variable and LD_PRELOAD,
 *                                   in environment order
 *   sigpipe=default|ignored         SIGPIPE's disposition at startup
 *   slept=<sleep(0)'s result>
 *   read=<bytes>                    one read(2) from stdin (0 at EOF)
 *
 * It calls sleep() and read() so that `greenhook doctor` finds them among
 * its imports, and nothing else that can block.
 */
#undef _FORTIFY_SOURCE /* read() must stay read(), not __read_chk() */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        printf("arg[%d]=%s\n", i, argv[i]);
    printf("argc=%d\n", argc);
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "GREENHOOK_", 10) == 0 || strncmp(*e, "LD_PRELOAD=", 11) == 0)
            printf("env %s\n", *e);
    struct sigaction sa;
    sigaction(SIGPIPE, NULL, &sa);
    printf("sigpipe=%s\n", sa.sa_handler == SIG_IGN ? "ignored" : "default");
    printf("slept=%u\n", sleep(0));
    char buf[64];
    printf("read=%zd\n", read(0, buf, sizeof buf));
    fflush(stdout);
    return argc > 1 ? atoi(argv[1]) : 0;
}
