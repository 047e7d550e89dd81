/* faultdelay: the fault tests' link delay (faultnet.py), made without
 * netem: what one side receives from another is held DELAY_MS ms (plus
 * 0..JITTER_MS ms, each packet its own, so that packets may overtake one
 * another as on netem's jittered link) before the kernel lets it through.
 *
 *   faultdelay QUEUE SRC_IP DELAY_MS JITTER_MS CAP
 *
 * Run in the receiving side's network namespace. It adds a table of its
 * own there (ip faultdelayQUEUE) whose input rule sends every packet from
 * SRC_IP to netfilter queue QUEUE (the xtables NFQUEUE target through
 * nf_tables' compat expression: this kernel has no nft "queue"
 * statement), binds that queue over netlink (nfnetlink_queue; no library)
 * and issues each packet's NF_ACCEPT verdict when it is due. Prints
 * "ready" once the rule is in and the queue bound.
 *
 * Bounded: at most CAP packets are held (the queue's length: the kernel
 * drops beyond it, as a full link would); the rule's bypass flag lets
 * packets through if no one listens on the queue (this program gone), so
 * a crash never turns a delay into a cut. It ends on SIGTERM, SIGINT or
 * when its parent (the test) dies, and on any netlink error of its
 * queue's socket; at the end it takes its table away and lets what it
 * still holds through. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nf_tables_compat.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* xt_NFQ_info_v3 (linux/netfilter/xt_NFQUEUE.h), padded to XT_ALIGN's 8
 * bytes as the compat expression's size check wants. */
struct nfq_info_v3 {
        uint16_t queuenum;
        uint16_t queues_total;
        uint16_t flags;
        uint16_t pad;
};
#define NFQ_FLAG_BYPASS 0x01

struct nlb {
        char buf[4096];
        size_t len, msg;
        uint32_t seq;
        int acks; /* messages sent with NLM_F_ACK */
};

static void msg_begin(struct nlb *b, uint16_t type, uint16_t flags, uint8_t family, uint16_t res_id)
{
        size_t need = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));

        if (b->len + need > sizeof b->buf)
                abort(); /* the messages are fixed and small */
        b->msg = b->len;
        struct nlmsghdr *h = (struct nlmsghdr *)(b->buf + b->len);
        memset(h, 0, need);
        h->nlmsg_type = type;
        h->nlmsg_flags = NLM_F_REQUEST | flags;
        h->nlmsg_seq = ++b->seq;
        h->nlmsg_len = need;
        struct nfgenmsg *g = NLMSG_DATA(h);
        g->nfgen_family = family;
        g->version = NFNETLINK_V0;
        g->res_id = htons(res_id);
        b->len += need;
        if (flags & NLM_F_ACK)
                b->acks++;
}

static void msg_end(struct nlb *b)
{
        ((struct nlmsghdr *)(b->buf + b->msg))->nlmsg_len = b->len - b->msg;
}

static void put(struct nlb *b, uint16_t type, const void *data, size_t len)
{
        if (b->len + NLA_ALIGN(NLA_HDRLEN + len) > sizeof b->buf)
                abort();
        struct nlattr *a = (struct nlattr *)(b->buf + b->len);
        a->nla_type = type;
        a->nla_len = NLA_HDRLEN + len;
        memset((char *)a + NLA_HDRLEN, 0, NLA_ALIGN(len));
        if (len)
                memcpy((char *)a + NLA_HDRLEN, data, len);
        b->len += NLA_ALIGN(NLA_HDRLEN + len);
}

static void put_be32(struct nlb *b, uint16_t type, uint32_t v)
{
        v = htonl(v);
        put(b, type, &v, sizeof v);
}

static void put_str(struct nlb *b, uint16_t type, const char *s)
{
        put(b, type, s, strlen(s) + 1);
}

static size_t nest(struct nlb *b, uint16_t type)
{
        size_t at = b->len;

        put(b, type | NLA_F_NESTED, NULL, 0);
        return at;
}

static void nest_end(struct nlb *b, size_t at)
{
        ((struct nlattr *)(b->buf + at))->nla_len = b->len - at;
}

static size_t expr(struct nlb *b, const char *name)
{
        size_t elem = nest(b, NFTA_LIST_ELEM);

        put_str(b, NFTA_EXPR_NAME, name);
        nest(b, NFTA_EXPR_DATA);
        return elem;
}

static void expr_end(struct nlb *b, size_t elem)
{
        /* The data nest is the element's second attribute: close both. */
        struct nlattr *name = (struct nlattr *)(b->buf + elem + NLA_HDRLEN);
        nest_end(b, elem + NLA_HDRLEN + NLA_ALIGN(name->nla_len));
        nest_end(b, elem);
}

static int nl_open(void)
{
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
        struct timeval tv = {.tv_sec = 2};

        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
                perror("faultdelay: netlink socket");
                exit(1);
        }
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        return fd;
}

/* Sends b and waits for its acknowledgements: 0, or the first error. */
static int nl_talk(int fd, struct nlb *b)
{
        struct sockaddr_nl to = {.nl_family = AF_NETLINK};
        char rbuf[8192];
        int acks = 0;

        if (sendto(fd, b->buf, b->len, 0, (struct sockaddr *)&to, sizeof to) < 0)
                return -errno;
        while (acks < b->acks) {
                ssize_t n = recv(fd, rbuf, sizeof rbuf, 0);
                if (n < 0)
                        return -errno;
                for (struct nlmsghdr *h = (struct nlmsghdr *)rbuf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
                        if (h->nlmsg_type != NLMSG_ERROR)
                                continue;
                        const struct nlmsgerr *e = NLMSG_DATA(h);
                        if (e->error)
                                return e->error;
                        acks++;
                }
        }
        return 0;
}

static void table_name(char *out, size_t n, unsigned queue)
{
        snprintf(out, n, "faultdelay%u", queue);
}

/* The batch that adds (add=1) or deletes the table with its chain and
 * rule: ip saddr SRC -> NFQUEUE num QUEUE bypass. */
static int rules(unsigned queue, struct in_addr src, int add)
{
        struct nlb *b = calloc(1, sizeof *b);
        char table[32];
        int fd = nl_open(), e;

        if (!b)
                abort();
        table_name(table, sizeof table, queue);
        msg_begin(b, NFNL_MSG_BATCH_BEGIN, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
        msg_end(b);
        if (!add) {
                msg_begin(b, NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_DELTABLE, NLM_F_ACK, NFPROTO_IPV4, 0);
                put_str(b, NFTA_TABLE_NAME, table);
                msg_end(b);
        } else {
                msg_begin(b, NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_ACK,
                          NFPROTO_IPV4, 0);
                put_str(b, NFTA_TABLE_NAME, table);
                msg_end(b);

                msg_begin(b, NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_ACK,
                          NFPROTO_IPV4, 0);
                put_str(b, NFTA_CHAIN_TABLE, table);
                put_str(b, NFTA_CHAIN_NAME, "input");
                size_t hook = nest(b, NFTA_CHAIN_HOOK);
                put_be32(b, NFTA_HOOK_HOOKNUM, NF_INET_LOCAL_IN);
                /* After the fault table's drops (priority 0): a packet the
                 * loss or a cut drops is not held first. */
                put_be32(b, NFTA_HOOK_PRIORITY, 10);
                nest_end(b, hook);
                put_be32(b, NFTA_CHAIN_POLICY, NF_ACCEPT);
                put_str(b, NFTA_CHAIN_TYPE, "filter");
                msg_end(b);

                msg_begin(b, NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWRULE,
                          NLM_F_CREATE | NLM_F_APPEND | NLM_F_ACK, NFPROTO_IPV4, 0);
                put_str(b, NFTA_RULE_TABLE, table);
                put_str(b, NFTA_RULE_CHAIN, "input");
                size_t list = nest(b, NFTA_RULE_EXPRESSIONS);
                size_t x = expr(b, "payload"); /* the IPv4 source address into register 1 */
                put_be32(b, NFTA_PAYLOAD_DREG, NFT_REG_1);
                put_be32(b, NFTA_PAYLOAD_BASE, NFT_PAYLOAD_NETWORK_HEADER);
                put_be32(b, NFTA_PAYLOAD_OFFSET, 12);
                put_be32(b, NFTA_PAYLOAD_LEN, 4);
                expr_end(b, x);
                x = expr(b, "cmp");
                put_be32(b, NFTA_CMP_SREG, NFT_REG_1);
                put_be32(b, NFTA_CMP_OP, NFT_CMP_EQ);
                size_t data = nest(b, NFTA_CMP_DATA);
                put(b, NFTA_DATA_VALUE, &src.s_addr, 4);
                nest_end(b, data);
                expr_end(b, x);
                x = expr(b, "target");
                struct nfq_info_v3 info = {.queuenum = queue, .queues_total = 1, .flags = NFQ_FLAG_BYPASS};
                put_str(b, NFTA_TARGET_NAME, "NFQUEUE");
                put_be32(b, NFTA_TARGET_REV, 3);
                put(b, NFTA_TARGET_INFO, &info, sizeof info);
                expr_end(b, x);
                nest_end(b, list);
                msg_end(b);
        }
        msg_begin(b, NFNL_MSG_BATCH_END, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
        msg_end(b);
        e = nl_talk(fd, b);
        close(fd);
        free(b);
        return e;
}

static int queue_config(int fd, unsigned queue, unsigned cap)
{
        struct nlb *b = calloc(1, sizeof *b);
        struct nfqnl_msg_config_cmd cmd = {.command = NFQNL_CFG_CMD_BIND, .pf = htons(AF_INET)};
        struct nfqnl_msg_config_params params = {.copy_range = 0, .copy_mode = NFQNL_COPY_META};
        int e;

        if (!b)
                abort();
        msg_begin(b, NFNL_SUBSYS_QUEUE << 8 | NFQNL_MSG_CONFIG, NLM_F_ACK, AF_UNSPEC, queue);
        put(b, NFQA_CFG_CMD, &cmd, sizeof cmd);
        msg_end(b);
        msg_begin(b, NFNL_SUBSYS_QUEUE << 8 | NFQNL_MSG_CONFIG, NLM_F_ACK, AF_UNSPEC, queue);
        put(b, NFQA_CFG_PARAMS, &params, sizeof params);
        put_be32(b, NFQA_CFG_QUEUE_MAXLEN, cap);
        msg_end(b);
        e = nl_talk(fd, b);
        free(b);
        return e;
}

struct held {
        uint32_t id;
        uint64_t due; /* ns, CLOCK_MONOTONIC */
};

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
        (void)sig;
        stopping = 1;
}

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Verdicts for held[0..n) in one send: NF_ACCEPT or NF_DROP. */
static void verdicts(int fd, unsigned queue, const struct held *h, size_t n, uint32_t verdict)
{
        struct nlb *b = calloc(1, sizeof *b);
        struct sockaddr_nl to = {.nl_family = AF_NETLINK};

        if (!b)
                abort();
        for (size_t i = 0; i < n; i++) {
                if (b->len + 64 > sizeof b->buf) {
                        sendto(fd, b->buf, b->len, 0, (struct sockaddr *)&to, sizeof to);
                        b->len = 0;
                }
                struct nfqnl_msg_verdict_hdr v = {.verdict = htonl(verdict), .id = htonl(h[i].id)};
                msg_begin(b, NFNL_SUBSYS_QUEUE << 8 | NFQNL_MSG_VERDICT, 0, AF_UNSPEC, queue);
                put(b, NFQA_VERDICT_HDR, &v, sizeof v);
                msg_end(b);
        }
        if (b->len)
                sendto(fd, b->buf, b->len, 0, (struct sockaddr *)&to, sizeof to);
        free(b);
}

/* A packet's id from an NFQNL_MSG_PACKET message, or -1. */
static int64_t packet_id(const struct nlmsghdr *h)
{
        size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));

        while (off + NLA_HDRLEN <= h->nlmsg_len) {
                const struct nlattr *a = (const struct nlattr *)((const char *)h + off);
                if (a->nla_len < NLA_HDRLEN || off + a->nla_len > h->nlmsg_len)
                        break;
                if ((a->nla_type & NLA_TYPE_MASK) == NFQA_PACKET_HDR &&
                    a->nla_len >= NLA_HDRLEN + sizeof(struct nfqnl_msg_packet_hdr)) {
                        struct nfqnl_msg_packet_hdr ph;
                        memcpy(&ph, (const char *)a + NLA_HDRLEN, sizeof ph);
                        return ntohl(ph.packet_id);
                }
                off += NLA_ALIGN(a->nla_len);
        }
        return -1;
}

int main(int argc, char **argv)
{
        if (argc != 6) {
                fprintf(stderr, "usage: faultdelay QUEUE SRC_IP DELAY_MS JITTER_MS CAP\n");
                return 2;
        }
        unsigned queue = (unsigned)strtoul(argv[1], NULL, 10);
        struct in_addr src;
        uint64_t delay = strtoull(argv[3], NULL, 10) * 1000000u;
        unsigned long jitter_ms = strtoul(argv[4], NULL, 10);
        size_t cap = strtoul(argv[5], NULL, 10);
        if (queue > 65535 || inet_pton(AF_INET, argv[2], &src) != 1 || cap == 0 || cap > 65536) {
                fprintf(stderr, "faultdelay: bad arguments\n");
                return 2;
        }
        struct held *held = calloc(cap, sizeof *held);
        if (!held)
                return 1;
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: poll returns */
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        srand48((long)now_ns() ^ getpid());

        int fd = nl_open();
        int one = 1, size = 4 << 20;
        setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
        int e = queue_config(fd, queue, (unsigned)cap);
        if (e) {
                fprintf(stderr, "faultdelay: binding queue %u: %s\n", queue, strerror(-e));
                return 1;
        }
        e = rules(queue, src, 1);
        if (e) {
                fprintf(stderr, "faultdelay: adding the NFQUEUE rule: %s\n", strerror(-e));
                return 1;
        }
        printf("ready\n");
        fflush(stdout);

        static char rbuf[65536];
        size_t n = 0; /* held[0..n), sorted by due */
        int status = 0;
        while (!stopping) {
                if (getppid() == 1)
                        break; /* the test is gone (PDEATHSIG raced it) */
                uint64_t t = now_ns();
                size_t due = 0;
                while (due < n && held[due].due <= t)
                        due++;
                if (due) {
                        verdicts(fd, queue, held, due, NF_ACCEPT);
                        memmove(held, held + due, (n - due) * sizeof *held);
                        n -= due;
                }
                int wait = n ? (int)((held[0].due - t + 999999) / 1000000) : 1000;
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int r = poll(&p, 1, wait);
                if (r <= 0)
                        continue; /* due packets, a signal or the idle check */
                ssize_t got = recv(fd, rbuf, sizeof rbuf, MSG_DONTWAIT);
                if (got < 0) {
                        if (errno == EAGAIN || errno == EINTR || errno == ENOBUFS)
                                continue;
                        perror("faultdelay: recv");
                        status = 1;
                        break;
                }
                t = now_ns();
                for (struct nlmsghdr *h = (struct nlmsghdr *)rbuf; NLMSG_OK(h, (size_t)got); h = NLMSG_NEXT(h, got)) {
                        if (h->nlmsg_type == NLMSG_ERROR) {
                                const struct nlmsgerr *err = NLMSG_DATA(h);
                                if (err->error)
                                        fprintf(stderr, "faultdelay: %s\n", strerror(-err->error));
                                continue;
                        }
                        if (h->nlmsg_type != (NFNL_SUBSYS_QUEUE << 8 | NFQNL_MSG_PACKET))
                                continue;
                        int64_t id = packet_id(h);
                        if (id < 0)
                                continue;
                        struct held x = {.id = (uint32_t)id,
                                         .due = t + delay + (uint64_t)(drand48() * (double)jitter_ms * 1e6)};
                        if (n == cap) { /* the kernel's queue length keeps this from happening */
                                verdicts(fd, queue, &x, 1, NF_DROP);
                                continue;
                        }
                        size_t i = n; /* insertion keeps held sorted by due */
                        while (i > 0 && held[i - 1].due > x.due) {
                                held[i] = held[i - 1];
                                i--;
                        }
                        held[i] = x;
                        n++;
                }
        }
        /* The rule first, so that nothing more is queued; then what is
         * held goes through (the link is healed). */
        e = rules(queue, src, 0);
        if (e)
                fprintf(stderr, "faultdelay: deleting its table: %s\n", strerror(-e));
        verdicts(fd, queue, held, n, NF_ACCEPT);
        close(fd);
        free(held);
        return status;
}
