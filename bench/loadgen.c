/*
 * Closed-loop request generator for the NameServer benchmark.
 *
 * Written in C so that the load generator is never the bottleneck when a
 * single-core Python server is measured. It reads pre-encoded request
 * frames (concatenated remoting frames) from a file, keeps DEPTH requests
 * in flight on each of CONNS loopback connections for SECONDS, picks a
 * random frame for every request, and prints one JSON line of results.
 * A response counts as an error unless its JSON header starts with
 * {"code":0, .  Only the address given on the command line is contacted.
 *
 * usage: loadgen HOST PORT CONNS SECONDS DEPTH FRAMES_FILE [tls]
 *
 * With "tls" (built with -DWITH_TLS, linked with -lssl -lcrypto) every
 * connection speaks TLS, like a Java client with -Dtls.enable=true: the
 * handshake happens before the clock starts and the server's certificate
 * is not verified (Java's test mode).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifdef WITH_TLS
#include <openssl/err.h>
#include <openssl/ssl.h>
static SSL_CTX *tls_ctx;
#endif

#define MAX_CONNS 1024
#define MAX_DEPTH 64
#define BUCKETS 200000 /* 10 us buckets up to 2 s */

typedef struct {
    int fd;
    void *ssl; /* SSL * when the connection speaks TLS */
    unsigned char *buf;
    size_t len, cap;
    double sent[MAX_DEPTH];
    int head, count;
} conn_t;

static unsigned char *frames_data;
static size_t *frame_off, *frame_len, nframes;
static uint64_t hist[BUCKETS + 1];

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

static void send_all(conn_t *c, const unsigned char *p, size_t n) {
#ifdef WITH_TLS
    if (c->ssl) {
        if (SSL_write((SSL *)c->ssl, p, (int)n) != (int)n) die("SSL_write");
        return;
    }
#endif
    while (n) {
        ssize_t w = send(c->fd, p, n, 0);
        if (w < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            die("send");
        }
        p += w;
        n -= (size_t)w;
    }
}

static void send_random(conn_t *c, double t) {
    size_t i = (size_t)random() % nframes;
    send_all(c, frames_data + frame_off[i], frame_len[i]);
    c->sent[(c->head + c->count) % MAX_DEPTH] = t;
    c->count++;
}

static double percentile(uint64_t total, double p) {
    uint64_t want = (uint64_t)(p / 100.0 * (double)(total - 1)) + 1, seen = 0;
    for (int i = 0; i <= BUCKETS; i++) {
        seen += hist[i];
        if (seen >= want) return (i + 0.5) * 0.01; /* ms */
    }
    return BUCKETS * 0.01;
}

int main(int argc, char **argv) {
    if (argc != 7 && !(argc == 8 && strcmp(argv[7], "tls") == 0)) {
        fprintf(stderr, "usage: %s HOST PORT CONNS SECONDS DEPTH FRAMES_FILE [tls]\n", argv[0]);
        return 2;
    }
    int use_tls = argc == 8;
#ifdef WITH_TLS
    if (use_tls) {
        tls_ctx = SSL_CTX_new(TLS_client_method());
        SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_NONE, NULL);
    }
#else
    if (use_tls) { fprintf(stderr, "built without TLS (-DWITH_TLS)\n"); return 2; }
#endif
    int nconns = atoi(argv[3]), depth = atoi(argv[5]);
    double seconds = atof(argv[4]);
    if (nconns < 1 || nconns > MAX_CONNS || depth < 1 || depth > MAX_DEPTH || seconds <= 0 || seconds > 600) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    FILE *f = fopen(argv[6], "rb");
    if (!f) die("frames file");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    frames_data = malloc((size_t)size);
    if (fread(frames_data, 1, (size_t)size, f) != (size_t)size) die("read frames");
    fclose(f);
    size_t cap = 1024;
    frame_off = malloc(cap * sizeof(size_t));
    frame_len = malloc(cap * sizeof(size_t));
    for (size_t pos = 0; pos + 4 <= (size_t)size;) {
        uint32_t l = ntohl(*(uint32_t *)(frames_data + pos));
        if (nframes == cap) {
            cap *= 2;
            frame_off = realloc(frame_off, cap * sizeof(size_t));
            frame_len = realloc(frame_len, cap * sizeof(size_t));
        }
        frame_off[nframes] = pos;
        frame_len[nframes++] = l + 4;
        pos += l + 4;
    }
    if (!nframes) { fprintf(stderr, "no frames\n"); return 2; }

    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) { fprintf(stderr, "bad host\n"); return 2; }
    if ((ntohl(sa.sin_addr.s_addr) >> 24) != 127) { fprintf(stderr, "loopback only\n"); return 2; }
    int ep = epoll_create1(0);
    conn_t *conns = calloc((size_t)nconns, sizeof(conn_t));
    double start = 0;
    for (int i = 0; i < nconns; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) die("connect");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conns[i].fd = fd;
#ifdef WITH_TLS
        if (use_tls) {
            SSL *ssl = SSL_new(tls_ctx);
            SSL_set_fd(ssl, fd);
            if (SSL_connect(ssl) != 1) { ERR_print_errors_fp(stderr); return 1; }
            conns[i].ssl = ssl;
        }
#endif
        conns[i].cap = 1 << 20;
        conns[i].buf = malloc(conns[i].cap);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
    start = now(); /* connected (and handshaken): the clock starts with the first requests */
    for (int i = 0; i < nconns; i++)
        for (int d = 0; d < depth; d++) send_random(&conns[i], now());
    uint64_t done = 0, errors = 0;
    double max_lat = 0, end = start + seconds;
    struct epoll_event evs[MAX_CONNS];
    while (1) {
        double t = now();
        if (t >= end) break;
        int n = epoll_wait(ep, evs, MAX_CONNS, 100);
        for (int e = 0; e < n; e++) {
            conn_t *c = &conns[evs[e].data.u32];
            if (c->cap - c->len < 65536) {
                c->cap *= 2;
                c->buf = realloc(c->buf, c->cap);
            }
            ssize_t r;
#ifdef WITH_TLS
            if (c->ssl) {
                /* blocking socket: a partial record is waited for (the server sends whole ones) */
                int got = SSL_read((SSL *)c->ssl, c->buf + c->len, (int)(c->cap - c->len));
                if (got <= 0) { fprintf(stderr, "server closed a TLS connection\n"); return 1; }
                r = got;
            } else
#endif
            r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
            if (r == 0) { fprintf(stderr, "server closed a connection\n"); return 1; }
            if (r < 0) { if (errno == EINTR) continue; die("recv"); }
            c->len += (size_t)r;
            size_t pos = 0;
            int completed = 0;
            t = now();
            while (c->len - pos >= 8) {
                uint32_t l = ntohl(*(uint32_t *)(c->buf + pos));
                if (c->len - pos - 4 < l) break;
                if (l < 14 || memcmp(c->buf + pos + 8, "{\"code\":0,", 10) != 0) errors++;
                double lat = t - c->sent[c->head];
                c->head = (c->head + 1) % MAX_DEPTH;
                c->count--;
                if (lat > max_lat) max_lat = lat;
                size_t b = (size_t)(lat * 1e5);
                hist[b > BUCKETS ? BUCKETS : b]++;
                done++;
                completed++;
                pos += 4 + l;
            }
            memmove(c->buf, c->buf + pos, c->len - pos);
            c->len -= pos;
            for (int k = 0; k < completed; k++) send_random(c, t);
        }
    }
    double elapsed = now() - start;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    printf("{\"connections\": %d, \"depth\": %d, \"queries\": %llu, \"errors\": %llu, \"qps\": %.1f, "
           "\"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f, \"client_cpu_pct\": %.1f}\n",
           nconns, depth, (unsigned long long)done, (unsigned long long)errors, done / elapsed,
           done ? percentile(done, 50) : 0.0, done ? percentile(done, 99) : 0.0, max_lat * 1000,
           100 * cpu / elapsed);
    return 0;
}
