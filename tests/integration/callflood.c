/* callflood: calls one method of one gadget over gadgetd's control socket
 * and counts the answers by outcome ("ok N", "error CODE N" lines).
 *   callflood SOCKET GADGET METHOD N [JSON]
 *       N calls at once: for tests of queues and concurrency. GADGET may
 *       be a comma-separated list: the calls go to them in turn (a burst
 *       of calls to several gadgets, in one write). "mismatched N" if
 *       answers came for an id twice or for one never sent.
 *   callflood --steady SOCKET GADGET METHOD [JSON]
 *       one call at a time until SIGTERM or SIGINT, then also "sent N",
 *       "unanswered N" and the latencies ("p50_us", "p99_us", "max_us"):
 *       the healthy caller of the hostile-load tests and benchmarks. A call
 *       unanswered after 30 s counts as unanswered and ends the run;
 *       "mismatched N": answers of another id than the call's (answered
 *       twice, or out of turn).
 *   callflood --paced RATE MAX SOCKET GADGET METHOD
 *       calls pipelined at RATE a second, the i-th with the integer i as
 *       its argument (a method that echoes it), until SIGTERM or MAX
 *       calls, then waits for every answer (30 s of silence at most).
 *       Beside the counts: "twice N" (ids answered more than once),
 *       "wrong N" (results other than their id), the latencies and
 *       "gap_us" (the longest time without an answer while calls were
 *       out); each error code's first message goes to stderr. The steady caller
 *       of the restart and reload tests.
 *   callflood --tally N SOCKET GADGET METHOD
 *       N calls, 64 in flight at most, and their string results counted
 *       ("value TEXT N" lines, at most 16 texts, beside "ok" and "error"):
 *       which version of a rollout answered (releases_test.py). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "contract.h"
#include "control.pb-c.h"
#include "json.h"
#include "value.h"
#include "wire.h"

static volatile sig_atomic_t stop_now;
/* --steady: the id the next answer must have (0: not checked), and the
 * answers that had another (a call answered twice, or out of turn). */
static uint64_t want_id;
static int mismatched;
/* N calls at once: the ids answered so far (an id twice, or one never
 * sent, is mismatched too). */
static unsigned char *seen;
static uint64_t seen_n;

static void on_stop(int sig)
{
        (void)sig;
        stop_now = 1;
}

static int answered_errors(const int *codes)
{
        int n = 0;
        for (int c = 0; c < 32; c++)
                n += codes[c];
        return n;
}

static int connect_to(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
                perror("callflood: connect");
                exit(1);
        }
        return fd;
}

/* The i-th of the comma-separated names in list (the first if fewer). */
static void nth_name(const char *list, uint64_t i, char *out, size_t len)
{
        size_t k = 1;
        for (const char *p = list; *p; p++)
                k += *p == ',';
        i %= k;
        const char *p = list;
        while (i--)
                p = strchr(p, ',') + 1;
        size_t n = strcspn(p, ",");
        snprintf(out, len, "%.*s", (int)n, p);
}

static void put_call(struct wire_writer *w, uint64_t id, char **argv, Gadget__Value *args)
{
        Control__Call call = CONTROL__CALL__INIT;
        char name[256];
        nth_name(argv[0], id - 1, name, sizeof name);
        call.name = name;
        call.method = argv[1];
        call.args = args;
        Control__Request q = CONTROL__REQUEST__INIT;
        q.id = id;
        q.version = CONTROL_PROTOCOL_VERSION;
        q.req_case = CONTROL__REQUEST__REQ_CALL;
        q.call = &call;
        if (wire_writer_put(w, &q.base, WIRE_MAX_FRAME) < 0)
                exit(1);
}

/* Waits up to ms for the next answer and counts it: 1 if one came, 0 if
 * none did in time, -1 if the connection ended (gadgetd gone: no answer
 * will come, and waiting on would spin). */
static int count_answer(struct wire_reader *r, int fd, int ms, int *ok, int *codes)
{
        const uint8_t *data;
        size_t len;
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        int rr = wire_reader_next(r, &data, &len);
        while (rr == 0) {
                int pr = poll(&pfd, 1, ms);
                if (pr < 0 && errno == EINTR && !stop_now)
                        continue;
                if (pr <= 0)
                        return 0;
                rr = wire_recv(r, fd, &data, &len);
                if (rr == 0)
                        return -1; /* readable, and no frame: the end */
        }
        if (rr < 0)
                return -1;
        Control__Response *resp = control__response__unpack(NULL, len, data);
        if (!resp)
                exit(1);
        if (want_id && resp->id != want_id)
                mismatched++;
        if (seen && (resp->id == 0 || resp->id > seen_n || seen[resp->id]++))
                mismatched++;
        if (resp->resp_case == CONTROL__RESPONSE__RESP_RESULT)
                (*ok)++;
        /* CALLFLOOD_RESULTS: each integer result with its call's id (calls
         * go out with ids 1..N in order), for tests of delivery order. */
        if (resp->resp_case == CONTROL__RESPONSE__RESP_RESULT && getenv("CALLFLOOD_RESULTS") &&
            resp->result->kind_case == GADGET__VALUE__KIND_INT_VALUE)
                printf("result %llu %lld\n", (unsigned long long)resp->id, (long long)resp->result->int_value);
        else if (resp->resp_case == CONTROL__RESPONSE__RESP_ERROR)
                codes[resp->error->code < 32 ? resp->error->code : 31]++;
        control__response__free_unpacked(resp, NULL);
        return 1;
}

static void print_counts(int sent, int ok, const int *codes)
{
        printf("ok %d\n", ok);
        printf("unanswered %d\n", sent - ok - answered_errors(codes));
        for (int c = 0; c < 32; c++)
                if (codes[c])
                        printf("error %d %d\n", c, codes[c]);
}

static uint64_t now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

/* N calls written at once, then their answers. Answers still missing
 * after CALLFLOOD_SILENCE_MS (default 2000) of silence are not waited for
 * (calls to a hung method); a test whose calls queue behind many slow ones
 * sets it higher. */
static int flood(int fd, char **argv, int n, Gadget__Value *args)
{
        struct wire_writer w;
        size_t each = 256 + (args ? gadget__value__get_packed_size(args) : 0);
        wire_writer_init(&w, (size_t)n * each + 4096);
        for (int i = 0; i < n; i++)
                put_call(&w, (uint64_t)i + 1, argv, args);
        if (wire_writer_flush(&w, fd) != 0)
                return 1;
        struct wire_reader r;
        wire_reader_init(&r, WIRE_MAX_FRAME);
        int ok = 0, codes[32] = { 0 };
        const char *silence = getenv("CALLFLOOD_SILENCE_MS");
        int ms = silence ? atoi(silence) : 2000;
        seen = calloc((size_t)n + 1, 1);
        seen_n = (uint64_t)n;
        for (int got = 0; got < n; got++)
                if (count_answer(&r, fd, ms, &ok, codes) <= 0)
                        break;
        print_counts(n, ok, codes);
        if (mismatched)
                printf("mismatched %d\n", mismatched);
        free(seen);
        wire_reader_free(&r);
        wire_writer_free(&w);
        return 0;
}

/* One call at a time until told to stop, with each call's latency. */
static int steady(int fd, char **argv, Gadget__Value *args)
{
        struct sigaction sa = { .sa_handler = on_stop };
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        struct wire_writer w;
        wire_writer_init(&w, 0);
        struct wire_reader r;
        wire_reader_init(&r, WIRE_MAX_FRAME);
        size_t cap = 4096, n = 0;
        uint64_t *lat = malloc(cap * sizeof *lat);
        int ok = 0, codes[32] = { 0 }, sent = 0;
        while (!stop_now && lat) {
                put_call(&w, (uint64_t)sent + 1, argv, args);
                want_id = (uint64_t)sent + 1;
                uint64_t t0 = now_us();
                if (wire_writer_flush(&w, fd) != 0)
                        break;
                sent++;
                /* A stop request waits for the call in flight. */
                int got = 0;
                for (uint64_t end = t0 + 30000000u; !got && now_us() < end;)
                        got = count_answer(&r, fd, 100, &ok, codes);
                if (got <= 0)
                        break;
                if (n == cap && !(lat = realloc(lat, (cap *= 2) * sizeof *lat)))
                        break;
                lat[n++] = now_us() - t0;
        }
        printf("sent %d\n", sent);
        printf("mismatched %d\n", mismatched);
        print_counts(sent, ok, codes);
        if (n) {
                qsort(lat, n, sizeof *lat, cmp_u64);
                printf("p50_us %llu\n", (unsigned long long)lat[n / 2]);
                printf("p99_us %llu\n", (unsigned long long)lat[n * 99 / 100]);
                printf("max_us %llu\n", (unsigned long long)lat[n - 1]);
        }
        free(lat);
        wire_reader_free(&r);
        wire_writer_free(&w);
        return 0;
}

/* Reads the answers that are there (or waits up to ms for one) and
 * counts each against the call it names. */
struct paced {
        uint64_t *sent_us;          /* per id, 0: not sent */
        unsigned char *answers;     /* per id: how many answers came */
        uint64_t *lat;
        size_t n_lat, max;
        int ok, codes[32], twice, wrong, stray;
        size_t out;                 /* calls sent and not answered yet */
        uint64_t since_us, gap_us;  /* since: the last answer, or the first call out after none was (0: none out) */
};

static int paced_read(struct paced *p, struct wire_reader *r, int fd, int ms)
{
        const uint8_t *data;
        size_t len;
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        int got = 0, rr;
        while ((rr = wire_reader_next(r, &data, &len)) == 1 || (!got && poll(&pfd, 1, ms) > 0 &&
                                                                 (rr = wire_recv(r, fd, &data, &len)) == 1)) {
                Control__Response *resp = control__response__unpack(NULL, len, data);
                if (!resp)
                        exit(1);
                uint64_t id = resp->id, now = now_us();
                got++;
                if (id == 0 || id > p->max || !p->sent_us[id - 1]) {
                        p->stray++;
                } else if (p->answers[id - 1]++) {
                        p->twice++;
                } else {
                        p->lat[p->n_lat++] = now - p->sent_us[id - 1];
                        /* The gap: the longest time with calls out and no answer. */
                        if (p->since_us && now - p->since_us > p->gap_us)
                                p->gap_us = now - p->since_us;
                        p->since_us = --p->out ? now : 0;
                        if (resp->resp_case == CONTROL__RESPONSE__RESP_RESULT) {
                                p->ok++;
                                if (resp->result->kind_case != GADGET__VALUE__KIND_INT_VALUE ||
                                    resp->result->int_value != (int64_t)id)
                                        p->wrong++;
                        } else if (resp->resp_case == CONTROL__RESPONSE__RESP_ERROR) {
                                if (!p->codes[resp->error->code < 32 ? resp->error->code : 31]++)
                                        fprintf(stderr, "callflood: call %llu: error %u: %s\n",
                                                (unsigned long long)id, resp->error->code, resp->error->message);
                        }
                }
                control__response__free_unpacked(resp, NULL);
        }
        return rr < 0 ? -1 : got;
}

/* Calls at a fixed rate, pipelined, each with its id as its argument. */
static int paced_run(int fd, char **argv, double rate, size_t max)
{
        struct sigaction sa = { .sa_handler = on_stop };
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        struct paced p = { .max = max, .sent_us = calloc(max, sizeof(uint64_t)), .answers = calloc(max, 1),
                           .lat = calloc(max, sizeof(uint64_t)) };
        if (!p.sent_us || !p.answers || !p.lat)
                return 1;
        struct wire_writer w;
        wire_writer_init(&w, 0);
        struct wire_reader r;
        wire_reader_init(&r, WIRE_MAX_FRAME);
        size_t sent = 0;
        uint64_t t0 = now_us(), every = (uint64_t)(1e6 / rate);
        while (!stop_now && sent < max) {
                uint64_t due = t0 + sent * every, now = now_us();
                if (now < due) {
                        if (paced_read(&p, &r, fd, (int)((due - now) / 1000) + 1) < 0)
                                break;
                        continue;
                }
                Gadget__Value *arg = value_new_int((int64_t)sent + 1);
                if (!arg)
                        return 1;
                put_call(&w, (uint64_t)sent + 1, argv, arg);
                value_free(arg);
                if (wire_writer_flush(&w, fd) != 0)
                        break;
                p.sent_us[sent++] = now_us();
                if (!p.out++)
                        p.since_us = p.sent_us[sent - 1];
                paced_read(&p, &r, fd, 0);
        }
        size_t answered = 0;
        for (;;) {
                answered = 0;
                for (size_t i = 0; i < sent; i++)
                        answered += p.answers[i] > 0;
                if (answered == sent || paced_read(&p, &r, fd, 30000) <= 0)
                        break;
        }
        printf("sent %zu\n", sent);
        print_counts((int)sent, p.ok, p.codes);
        printf("twice %d\nwrong %d\nstray %d\n", p.twice, p.wrong, p.stray);
        if (p.n_lat) {
                qsort(p.lat, p.n_lat, sizeof *p.lat, cmp_u64);
                printf("p50_us %llu\n", (unsigned long long)p.lat[p.n_lat / 2]);
                printf("p99_us %llu\n", (unsigned long long)p.lat[p.n_lat * 99 / 100]);
                printf("max_us %llu\n", (unsigned long long)p.lat[p.n_lat - 1]);
                printf("gap_us %llu\n", (unsigned long long)p.gap_us);
        }
        free(p.sent_us);
        free(p.answers);
        free(p.lat);
        wire_reader_free(&r);
        wire_writer_free(&w);
        return 0;
}

/* --tally: n calls, 64 in flight, their string results counted. */
#define TALLY_TEXTS 16
static int tally(int fd, char **argv, int n)
{
        struct wire_writer w;
        wire_writer_init(&w, 0);
        struct wire_reader r;
        wire_reader_init(&r, WIRE_MAX_FRAME);
        Gadget__Value *args = value_new_null();
        char *texts[TALLY_TEXTS];
        int counts[TALLY_TEXTS] = { 0 }, n_texts = 0, ok = 0, codes[32] = { 0 }, sent = 0, got = 0, other = 0;
        while (got < n && args) {
                while (sent < n && sent - got < 64)
                        put_call(&w, (uint64_t)++sent, argv, args);
                if (wire_writer_flush(&w, fd) != 0)
                        break;
                const uint8_t *data;
                size_t len;
                int rr = wire_reader_next(&r, &data, &len);
                if (rr == 0)
                        rr = wire_recv(&r, fd, &data, &len);
                if (rr <= 0)
                        break;
                Control__Response *resp = control__response__unpack(NULL, len, data);
                if (!resp)
                        exit(1);
                got++;
                if (resp->resp_case == CONTROL__RESPONSE__RESP_RESULT &&
                    resp->result->kind_case == GADGET__VALUE__KIND_STRING_VALUE) {
                        ok++;
                        int i = 0;
                        while (i < n_texts && strcmp(texts[i], resp->result->string_value) != 0)
                                i++;
                        if (i == n_texts && n_texts < TALLY_TEXTS && (texts[i] = strdup(resp->result->string_value)))
                                n_texts++;
                        if (i < n_texts)
                                counts[i]++;
                        else
                                other++;
                } else if (resp->resp_case == CONTROL__RESPONSE__RESP_RESULT) {
                        ok++;
                        other++;
                } else if (resp->resp_case == CONTROL__RESPONSE__RESP_ERROR) {
                        codes[resp->error->code < 32 ? resp->error->code : 31]++;
                }
                control__response__free_unpacked(resp, NULL);
        }
        print_counts(sent, ok, codes);
        for (int i = 0; i < n_texts; i++) {
                printf("value %s %d\n", texts[i], counts[i]);
                free(texts[i]);
        }
        printf("other %d\n", other);
        value_free(args);
        wire_reader_free(&r);
        wire_writer_free(&w);
        return 0;
}

int main(int argc, char **argv)
{
        if (argc == 6 && strcmp(argv[1], "--tally") == 0) {
                int n = atoi(argv[2]);
                if (n <= 0) {
                        fprintf(stderr, "callflood: --tally needs a positive N\n");
                        return 2;
                }
                int fd = connect_to(argv[3]);
                int rc = tally(fd, argv + 4, n);
                close(fd);
                return rc;
        }
        if (argc == 7 && strcmp(argv[1], "--paced") == 0) {
                double rate = atof(argv[2]);
                long max = atol(argv[3]);
                if (rate <= 0 || max <= 0) {
                        fprintf(stderr, "callflood: --paced needs a positive RATE and MAX\n");
                        return 2;
                }
                int fd = connect_to(argv[4]);
                int rc = paced_run(fd, argv + 5, rate, (size_t)max);
                close(fd);
                return rc;
        }
        int is_steady = argc > 1 && strcmp(argv[1], "--steady") == 0;
        if (argc < 5) {
                fprintf(stderr, "usage: callflood SOCKET GADGET METHOD N [JSON]\n"
                                "       callflood --steady SOCKET GADGET METHOD [JSON]\n"
                                "       callflood --paced RATE MAX SOCKET GADGET METHOD\n");
                return 2;
        }
        argv += is_steady;
        argc -= is_steady;
        int json_at = is_steady ? 4 : 5;
        Gadget__Value *args = NULL;
        char err[256];
        if (argc > json_at ? json_to_value(argv[json_at], strlen(argv[json_at]), &args, err, sizeof err) < 0
                           : !(args = value_new_null())) {
                fprintf(stderr, "callflood: bad JSON\n");
                return 2;
        }
        int fd = connect_to(argv[1]);
        int rc = is_steady ? steady(fd, argv + 2, args) : flood(fd, argv + 2, atoi(argv[4]), args);
        value_free(args);
        close(fd);
        return rc;
}
