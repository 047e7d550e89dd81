/* curl_dl: libcurl, loaded when gadgetd first needs it (an http binding's
 * first request) instead of at every start. libcurl pulls in some thirty
 * libraries (TLS, Kerberos, LDAP, compression) whose loading made up a
 * third of a `gadgetd run` that uses no HTTP at all; see BENCHMARKS.md.
 *
 * The functions below carry libcurl's own names and forward to the loaded
 * library; they are hidden, so nothing but gadgetd's own code can bind to
 * them. Until curl_dl_load succeeded they fail as libcurl does when out of
 * memory. The table is this process's one copy of libcurl's entry points,
 * as the dynamic linker's would be: the only state kept outside the
 * daemon's context struct, and it never changes after loading. */
#include "curl_dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dl.h"

#define HIDDEN __attribute__((visibility("hidden")))

/* Whoever calls these never sees the type-checking macros of curl.h. */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt

static struct {
        void *lib;
        CURLcode (*global_init)(long);
        CURL *(*easy_init)(void);
        void (*easy_cleanup)(CURL *);
        CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
        CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
        const char *(*easy_strerror)(CURLcode);
        void (*free)(void *);
        CURLM *(*multi_init)(void);
        CURLMcode (*multi_cleanup)(CURLM *);
        CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
        CURLMcode (*multi_add_handle)(CURLM *, CURL *);
        CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
        CURLMcode (*multi_assign)(CURLM *, curl_socket_t, void *);
        CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
        CURLMsg *(*multi_info_read)(CURLM *, int *);
        struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
        void (*slist_free_all)(struct curl_slist *);
        CURLU *(*url)(void);
        void (*url_cleanup)(CURLU *);
        CURLUcode (*url_get)(CURLU *, CURLUPart, char **, unsigned int);
        CURLUcode (*url_set)(CURLU *, CURLUPart, const char *, unsigned int);
} fn;

#define SYM(field, name) { (void **)&fn.field, name }

int curl_dl_load(char *err, size_t errlen)
{
        static const struct dl_sym syms[] = {
                SYM(global_init, "curl_global_init"), SYM(easy_init, "curl_easy_init"),
                SYM(easy_cleanup, "curl_easy_cleanup"), SYM(easy_setopt, "curl_easy_setopt"),
                SYM(easy_getinfo, "curl_easy_getinfo"), SYM(easy_strerror, "curl_easy_strerror"),
                SYM(free, "curl_free"), SYM(multi_init, "curl_multi_init"),
                SYM(multi_cleanup, "curl_multi_cleanup"), SYM(multi_setopt, "curl_multi_setopt"),
                SYM(multi_add_handle, "curl_multi_add_handle"),
                SYM(multi_remove_handle, "curl_multi_remove_handle"), SYM(multi_assign, "curl_multi_assign"),
                SYM(multi_socket_action, "curl_multi_socket_action"),
                SYM(multi_info_read, "curl_multi_info_read"), SYM(slist_append, "curl_slist_append"),
                SYM(slist_free_all, "curl_slist_free_all"), SYM(url, "curl_url"),
                SYM(url_cleanup, "curl_url_cleanup"), SYM(url_get, "curl_url_get"),
                SYM(url_set, "curl_url_set"),
        };
        if (fn.lib)
                return 0;
        void *lib = dl_load(CURL_DL_SONAME, syms, sizeof syms / sizeof *syms, err, errlen);
        if (!lib)
                return -ENOENT;
        if (fn.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                snprintf(err, errlen, "curl_global_init failed");
                memset(&fn, 0, sizeof fn);
                dlclose(lib);
                return -EIO;
        }
        fn.lib = lib;
        return 0;
}

/* The one argument after the option, read as its option type says: the
 * same rule libcurl uses to read it (CURLOPTTYPE_* ranges). */
union opt_arg {
        long l;
        void *p;
        curl_off_t off;
};

static union opt_arg read_opt(int option, va_list ap)
{
        union opt_arg a;
        if (option < CURLOPTTYPE_OBJECTPOINT)
                a.l = va_arg(ap, long);
        else if (option < CURLOPTTYPE_OFF_T)
                a.p = va_arg(ap, void *);
        else if (option < CURLOPTTYPE_BLOB)
                a.off = va_arg(ap, curl_off_t);
        else
                a.p = va_arg(ap, void *);
        return a;
}

HIDDEN CURLcode curl_easy_setopt(CURL *h, CURLoption option, ...)
{
        va_list ap;
        if (!fn.lib)
                return CURLE_FAILED_INIT;
        va_start(ap, option);
        union opt_arg a = read_opt((int)option, ap);
        va_end(ap);
        if (option < CURLOPTTYPE_OBJECTPOINT)
                return fn.easy_setopt(h, option, a.l);
        if (option >= CURLOPTTYPE_OFF_T && option < CURLOPTTYPE_BLOB)
                return fn.easy_setopt(h, option, a.off);
        return fn.easy_setopt(h, option, a.p);
}

HIDDEN CURLMcode curl_multi_setopt(CURLM *m, CURLMoption option, ...)
{
        va_list ap;
        if (!fn.lib)
                return CURLM_INTERNAL_ERROR;
        va_start(ap, option);
        union opt_arg a = read_opt((int)option, ap);
        va_end(ap);
        if (option < CURLOPTTYPE_OBJECTPOINT)
                return fn.multi_setopt(m, option, a.l);
        if (option >= CURLOPTTYPE_OFF_T && option < CURLOPTTYPE_BLOB)
                return fn.multi_setopt(m, option, a.off);
        return fn.multi_setopt(m, option, a.p);
}

/* Every CURLINFO takes a pointer to where the answer goes. */
HIDDEN CURLcode curl_easy_getinfo(CURL *h, CURLINFO info, ...)
{
        va_list ap;
        if (!fn.lib)
                return CURLE_FAILED_INIT;
        va_start(ap, info);
        void *p = va_arg(ap, void *);
        va_end(ap);
        return fn.easy_getinfo(h, info, p);
}

HIDDEN CURL *curl_easy_init(void) { return fn.lib ? fn.easy_init() : NULL; }
HIDDEN void curl_easy_cleanup(CURL *h) { if (fn.lib) fn.easy_cleanup(h); }
HIDDEN const char *curl_easy_strerror(CURLcode c) { return fn.lib ? fn.easy_strerror(c) : "libcurl not loaded"; }
HIDDEN void curl_free(void *p) { if (fn.lib) fn.free(p); }
HIDDEN CURLM *curl_multi_init(void) { return fn.lib ? fn.multi_init() : NULL; }
HIDDEN CURLMcode curl_multi_cleanup(CURLM *m) { return fn.lib ? fn.multi_cleanup(m) : CURLM_INTERNAL_ERROR; }

HIDDEN CURLMcode curl_multi_add_handle(CURLM *m, CURL *h)
{
        return fn.lib ? fn.multi_add_handle(m, h) : CURLM_INTERNAL_ERROR;
}

HIDDEN CURLMcode curl_multi_remove_handle(CURLM *m, CURL *h)
{
        return fn.lib ? fn.multi_remove_handle(m, h) : CURLM_INTERNAL_ERROR;
}

HIDDEN CURLMcode curl_multi_assign(CURLM *m, curl_socket_t s, void *p)
{
        return fn.lib ? fn.multi_assign(m, s, p) : CURLM_INTERNAL_ERROR;
}

HIDDEN CURLMcode curl_multi_socket_action(CURLM *m, curl_socket_t s, int ev, int *running)
{
        return fn.lib ? fn.multi_socket_action(m, s, ev, running) : CURLM_INTERNAL_ERROR;
}

HIDDEN CURLMsg *curl_multi_info_read(CURLM *m, int *left)
{
        return fn.lib ? fn.multi_info_read(m, left) : NULL;
}

HIDDEN struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s)
{
        return fn.lib ? fn.slist_append(l, s) : NULL;
}

HIDDEN void curl_slist_free_all(struct curl_slist *l) { if (fn.lib) fn.slist_free_all(l); }
HIDDEN CURLU *curl_url(void) { return fn.lib ? fn.url() : NULL; }
HIDDEN void curl_url_cleanup(CURLU *u) { if (fn.lib) fn.url_cleanup(u); }

HIDDEN CURLUcode curl_url_get(CURLU *u, CURLUPart what, char **part, unsigned int flags)
{
        return fn.lib ? fn.url_get(u, what, part, flags) : CURLUE_OUT_OF_MEMORY;
}

HIDDEN CURLUcode curl_url_set(CURLU *u, CURLUPart what, const char *part, unsigned int flags)
{
        return fn.lib ? fn.url_set(u, what, part, flags) : CURLUE_OUT_OF_MEMORY;
}
