/* filter_run: a seccomp program run outside the kernel, as the kernel runs
 * it. The sandbox's init answers each refused call of its program with
 * the errno the program's `direct` variant gives (filter.h): the answer is
 * the filter's own, at the same point, and kept in one place. */
#include "filter.h"

#include <stddef.h>
#include <linux/seccomp.h>

uint32_t filter_verdict(const struct sock_fprog *p, const struct seccomp_data *d)
{
        uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
        const unsigned char *data = (const unsigned char *)d;
        for (size_t pc = 0; pc < p->len; pc++) {
                const struct sock_filter *f = &p->filter[pc];
                uint32_t k = f->k, src = BPF_SRC(f->code) == BPF_X ? x : k;
                switch (BPF_CLASS(f->code)) {
                case BPF_LD:
                        if (f->code == (BPF_LD | BPF_W | BPF_ABS)) {
                                if (k > sizeof *d - sizeof a || k % sizeof a)
                                        return SECCOMP_RET_KILL_PROCESS;
                                a = *(const uint32_t *)(data + k);
                        } else if (f->code == (BPF_LD | BPF_W | BPF_LEN)) {
                                a = sizeof *d;
                        } else if (f->code == (BPF_LD | BPF_IMM)) {
                                a = k;
                        } else if (f->code == (BPF_LD | BPF_MEM) && k < BPF_MEMWORDS) {
                                a = mem[k];
                        } else {
                                return SECCOMP_RET_KILL_PROCESS;
                        }
                        break;
                case BPF_LDX:
                        if (f->code == (BPF_LDX | BPF_W | BPF_LEN))
                                x = sizeof *d;
                        else if (f->code == (BPF_LDX | BPF_IMM))
                                x = k;
                        else if (f->code == (BPF_LDX | BPF_MEM) && k < BPF_MEMWORDS)
                                x = mem[k];
                        else
                                return SECCOMP_RET_KILL_PROCESS;
                        break;
                case BPF_ST:
                case BPF_STX:
                        if (k >= BPF_MEMWORDS)
                                return SECCOMP_RET_KILL_PROCESS;
                        mem[k] = BPF_CLASS(f->code) == BPF_ST ? a : x;
                        break;
                case BPF_ALU:
                        switch (BPF_OP(f->code)) {
                        case BPF_ADD: a += src; break;
                        case BPF_SUB: a -= src; break;
                        case BPF_MUL: a *= src; break;
                        case BPF_DIV: if (!src) return 0; a /= src; break;
                        case BPF_MOD: if (!src) return 0; a %= src; break;
                        case BPF_OR: a |= src; break;
                        case BPF_AND: a &= src; break;
                        case BPF_XOR: a ^= src; break;
                        case BPF_LSH: a = src < 32 ? a << src : 0; break;
                        case BPF_RSH: a = src < 32 ? a >> src : 0; break;
                        case BPF_NEG: a = -a; break;
                        default: return SECCOMP_RET_KILL_PROCESS;
                        }
                        break;
                case BPF_JMP: {
                        size_t skip;
                        if (BPF_OP(f->code) == BPF_JA) {
                                skip = k;
                        } else {
                                bool t;
                                switch (BPF_OP(f->code)) {
                                case BPF_JEQ: t = a == src; break;
                                case BPF_JGT: t = a > src; break;
                                case BPF_JGE: t = a >= src; break;
                                case BPF_JSET: t = (a & src) != 0; break;
                                default: return SECCOMP_RET_KILL_PROCESS;
                                }
                                skip = t ? f->jt : f->jf;
                        }
                        if (skip >= p->len - pc - 1)
                                return SECCOMP_RET_KILL_PROCESS;
                        pc += skip;
                        break;
                }
                case BPF_RET:
                        return BPF_RVAL(f->code) == BPF_A ? a : k;
                case BPF_MISC:
                        if (BPF_MISCOP(f->code) == BPF_TAX)
                                x = a;
                        else
                                a = x;
                        break;
                default:
                        return SECCOMP_RET_KILL_PROCESS;
                }
        }
        return SECCOMP_RET_KILL_PROCESS; /* fell off the end: the kernel refuses such a program */
}
