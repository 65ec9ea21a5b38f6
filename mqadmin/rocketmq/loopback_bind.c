/*
 * LD_PRELOAD shim: a bind() to the wildcard address becomes a bind to loopback.
 * Java RocketMQ 4.9.7 binds its NameServer, broker and HA ports to every interface and has no key to
 * change that (5.x has bindAddress for the main port only, not for a broker's HA and fast ports). The
 * local cluster and the tests run Java servers on 127.0.0.1 only: mqadmin/rocketmq/loopback.py compiles
 * this file on first use and loads it into the Java server processes, nothing else.
 * Build: cc -shared -fPIC -O2 -o libloopback_bind.so loopback_bind.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real_bind;
    if (!real_bind) {
        real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    }
    if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in v4;
        memcpy(&v4, addr, sizeof v4);
        if (v4.sin_addr.s_addr == htonl(INADDR_ANY)) {
            v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real_bind(fd, (const struct sockaddr *)&v4, sizeof v4);
        }
    } else if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 v6;
        memcpy(&v6, addr, sizeof v6);
        if (memcmp(&v6.sin6_addr, &in6addr_any, sizeof in6addr_any) == 0) {
            /* ::ffff:127.0.0.1: loopback IPv4 peers only, on a dual-stack socket. */
            static const unsigned char mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
            memcpy(&v6.sin6_addr, mapped, sizeof mapped);
            return real_bind(fd, (const struct sockaddr *)&v6, sizeof v6);
        }
    }
    return real_bind(fd, addr, len);
}
