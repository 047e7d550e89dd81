/* listener: pausing a listener that cannot accept; taking one over. */
#include "listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "log.h"
#include "timer.h"

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
        evconnlistener_enable(arg);
}

struct event *listener_resume_new(struct evconnlistener *lev)
{
        return evtimer_new(evconnlistener_get_base(lev), resume_cb, lev);
}

void listener_pause(struct evconnlistener *lev, struct event *resume, const char *who, unsigned ms)
{
        int err = EVUTIL_SOCKET_ERROR();
        struct timeval tv = timer_tv_ms(ms);
        evconnlistener_disable(lev);
        log_msg(L_WARN, NULL, "%s: cannot accept: %s; not accepting for %u ms", who, strerror(err), ms);
        int e = resume ? event_add(resume, &tv)
                       : event_base_once(evconnlistener_get_base(lev), -1, EV_TIMEOUT, resume_cb, lev, &tv);
        if (e < 0)
                evconnlistener_enable(lev);
}

void listener_name(struct evconnlistener *lev, char *buf, size_t len)
{
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        char addr[INET6_ADDRSTRLEN] = "?";
        memset(&ss, 0, sizeof ss);
        if (getsockname(evconnlistener_get_fd(lev), (struct sockaddr *)&ss, &sl) < 0)
                ss.ss_family = AF_UNSPEC;
        if (ss.ss_family == AF_INET) {
                const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
                inet_ntop(AF_INET, &a->sin_addr, addr, sizeof addr);
                snprintf(buf, len, "listener on %s:%u", addr, ntohs(a->sin_port));
        } else if (ss.ss_family == AF_INET6) {
                const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
                inet_ntop(AF_INET6, &a->sin6_addr, addr, sizeof addr);
                snprintf(buf, len, "listener on [%s]:%u", addr, ntohs(a->sin6_port));
        } else if (ss.ss_family == AF_UNIX) {
                const struct sockaddr_un *a = (const struct sockaddr_un *)&ss;
                snprintf(buf, len, "listener on %.*s", (int)sizeof a->sun_path, a->sun_path);
        } else {
                snprintf(buf, len, "listener on fd %d", (int)evconnlistener_get_fd(lev));
        }
}

int listener_parse_loopback(const char *s, struct sockaddr_storage *sa, socklen_t *len)
{
        char host[64];
        const char *colon = strrchr(s, ':');
        size_t hlen = colon ? (size_t)(colon - s) : 0;
        char *end;
        unsigned long port;

        if (!colon || hlen == 0 || hlen >= sizeof host || !colon[1])
                goto bad;
        errno = 0;
        port = strtoul(colon + 1, &end, 10);
        if (errno || *end || port > 65535 || colon[1] < '0' || colon[1] > '9')
                goto bad;
        memcpy(host, s, hlen);
        host[hlen] = '\0';
        memset(sa, 0, sizeof *sa);
        if (host[0] == '[' && host[hlen - 1] == ']') {
                struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)sa;
                host[hlen - 1] = '\0';
                if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
                        goto bad;
                a6->sin6_family = AF_INET6;
                a6->sin6_port = htons((uint16_t)port);
                *len = sizeof *a6;
                if (!IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr))
                        goto not_loopback;
                return 0;
        }
        struct sockaddr_in *a4 = (struct sockaddr_in *)sa;
        if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
                goto bad;
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *len = sizeof *a4;
        if ((ntohl(a4->sin_addr.s_addr) >> 24) != 127)
                goto not_loopback;
        return 0;
bad:
        return -EINVAL;
not_loopback:
        return -EADDRNOTAVAIL;
}

int listener_adopt(int fd, int family)
{
        struct sockaddr_storage got;
        socklen_t glen = sizeof got;
        int type = 0, acc = 0;
        socklen_t tl = sizeof type, al = sizeof acc;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 ||
            type != SOCK_STREAM || !acc || getsockname(fd, (struct sockaddr *)&got, &glen) < 0 || got.ss_family != family)
                return -EINVAL;
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
                return -EINVAL;
        return 0;
}
