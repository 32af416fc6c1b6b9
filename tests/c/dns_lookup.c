/*
 * dns_lookup: 50 threads resolve names while a ticker ticks every 10 ms.
 *
 * Each thread calls getaddrinfo, getnameinfo, gethostbyname,
 * gethostbyname2, gethostbyname_r, gethostbyname2_r, gethostbyaddr and
 * gethostbyaddr_r on "localhost" / 127.0.0.1 (answered by /etc/hosts through
 * NSS: no network traffic), ROUNDS times. The non-reentrant calls are made
 * under a mutex, as a correct threaded program must.
 *
 * usage: dns_lookup [ROUNDS]   (default 20)
 * stdout: per-call success counts and the answers (deterministic)
 * stderr: the ticker's report (ticker.h)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ticker.h"

#define THREADS 50
static int rounds = 20;
static pthread_mutex_t nonreentrant = PTHREAD_MUTEX_INITIALIZER;
static int ok[8];
static char answers[8][64];
static pthread_mutex_t tally = PTHREAD_MUTEX_INITIALIZER;

static void record(int i, int success, const char *answer)
{
    pthread_mutex_lock(&tally);
    if (success) {
        ok[i]++;
        snprintf(answers[i], sizeof answers[i], "%s", answer);
    }
    pthread_mutex_unlock(&tally);
}

static const char *addr_of(const struct hostent *h, char *buf)
{
    if (!h || !h->h_addr_list[0])
        return "";
    return inet_ntop(h->h_addrtype, h->h_addr_list[0], buf, 64);
}

static void *resolver(void *arg)
{
    (void)arg;
    char buf[64], host[256], work[4096];
    struct in_addr lo = { htonl(INADDR_LOOPBACK) };
    for (int r = 0; r < rounds; r++) {
        struct addrinfo hints = { 0 }, *res = NULL;
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        int e = getaddrinfo("localhost", "80", &hints, &res);
        record(0, e == 0, e == 0 ? inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, buf, 64) : "");
        if (res)
            freeaddrinfo(res);

        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(80), .sin_addr = lo };
        e = getnameinfo((struct sockaddr *)&sa, sizeof sa, host, sizeof host, NULL, 0, NI_NAMEREQD);
        record(1, e == 0, host);

        pthread_mutex_lock(&nonreentrant);
        struct hostent *h = gethostbyname("localhost");
        record(2, h != NULL, addr_of(h, buf));
        h = gethostbyname2("localhost", AF_INET);
        record(3, h != NULL, addr_of(h, buf));
        h = gethostbyaddr(&lo, sizeof lo, AF_INET);
        record(6, h != NULL, h ? h->h_name : "");
        pthread_mutex_unlock(&nonreentrant);

        struct hostent he, *hp = NULL;
        int herr = 0;
        e = gethostbyname_r("localhost", &he, work, sizeof work, &hp, &herr);
        record(4, e == 0 && hp, addr_of(hp, buf));
        e = gethostbyname2_r("localhost", AF_INET, &he, work, sizeof work, &hp, &herr);
        record(5, e == 0 && hp, addr_of(hp, buf));
        e = gethostbyaddr_r(&lo, sizeof lo, AF_INET, &he, work, sizeof work, &hp, &herr);
        record(7, e == 0 && hp, hp ? hp->h_name : "");
    }
    return NULL;
}

int main(int argc, char **argv)
{
    static const char *names[8] = { "getaddrinfo",     "getnameinfo",      "gethostbyname", "gethostbyname2",
                                    "gethostbyname_r", "gethostbyname2_r", "gethostbyaddr", "gethostbyaddr_r" };
    if (argc > 1)
        rounds = atoi(argv[1]);
    alarm(60);
    pthread_t tick = ticker_start(), t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, resolver, NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    ticker_stop(tick);
    for (int i = 0; i < 8; i++)
        printf("%s: ok=%d answer=%s\n", names[i], ok[i], answers[i]);
    return 0;
}
