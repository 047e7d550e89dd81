/* listener: the pause of a listening socket that cannot accept (at the fd
 * limit, EMFILE and the like), for gadgetd's libevent listeners (the
 * gateway's, the node link's). Why a pause: the pending connection stays
 * in the queue and the socket stays readable, so accepting again at once
 * would spin (and libevent would log each failure). The control socket
 * accepts in bounded batches of its own and pauses the same way
 * (control/control.c). */
#pragma once

#include <sys/socket.h>
#include <event2/event.h>
#include <event2/listener.h>

/* A timer that accepts on lev again when it fires: the caller's to free
 * (before lev), so that no pause outlives its listener. NULL: no memory. */
struct event *listener_resume_new(struct evconnlistener *lev);
/* From a listener's error callback: stops accepting on lev for ms, then
 * accepts again (by resume, from listener_resume_new; NULL: a one-shot
 * event of the loop's, for a listener that lives as long as the loop, as
 * the gateway's, whose callback argument is evhttp's), logging why once
 * per pause (who: "gateway", "the peer link"). */
void listener_pause(struct evconnlistener *lev, struct event *resume, const char *who, unsigned ms);
/* "listener on ADDRESS" (its bound address: IP:PORT, [IPv6]:PORT or a
 * Unix socket's path), for the log lines of one whose owner is unknown
 * (an evhttp server's). */
void listener_name(struct evconnlistener *lev, char *buf, size_t len);
/* Parses "127.0.0.1:PORT" or "[::1]:PORT" (numeric; PORT 0 picks a free
 * port) into sa: 0, -EINVAL if it is not ADDRESS:PORT, -EADDRNOTAVAIL if
 * the address is not a loopback one (127.0.0.0/8, ::1). */
int listener_parse_loopback(const char *s, struct sockaddr_storage *sa, socklen_t *len);
/* A listening socket handed on by gadgetd's previous image (re-exec, the
 * fd store): fd must be a stream socket that listens, of family; it is
 * made non-blocking and close-on-exec. 0, or -EINVAL if it is not one.
 * Why the check: the fd's number comes from the handed-on state, read as
 * hostile. */
int listener_adopt(int fd, int family);
