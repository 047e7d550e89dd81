/* crash: the program's crashes explained by the sandbox's init, its
 * tracer (crash.c): a bounded ELF core of the crashing program (core.c),
 * symbolised in a child under the gadget's whole filter (symbolise.c). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox_abi.h"

struct sandbox_config;

/* What gadgetd hears of a crash (sandbox.proto Crash). */
struct crash_info {
        int signal, code;
        uint64_t address;
        pid_t thread;
        uint64_t core_size;     /* CoreDump=: the core's bytes in cfg->core_fd */
        size_t n_frames;
        char frames[SANDBOX_CRASH_FRAMES_MAX][SANDBOX_CRASH_FRAME_MAX + 1];
};

/* The core the backtrace is read from: the crashing thread's stack first,
 * then the ELF headers, then writable mappings while they fit. */
#define CRASH_CORE_MAX (8u << 20)
/* The symbolising child's bound: then it is killed (the crash is reported
 * without a backtrace). */
#define CRASH_SYMBOLISE_MS 3000

/* In the init, once the program exec'd, if it asked to be traced (PID 2
 * calls PTRACE_TRACEME before its exec): seizes it before its first
 * instruction. True if it ended meanwhile, with its wait status in
 * *status. */
bool crash_trace(pid_t program, int *status);
/* A wait status of a traced thread: true if it was a stop (handled: the
 * thread resumed, with its signal), false for an end. */
bool crash_stopped(const struct sandbox_config *cfg, pid_t pid, int status);
/* gadgetctl debug: lets go of the program for the rest of this run. */
void crash_detach(void);
/* Reports the crash seen to gadgetd on fd if the program died of it
 * (status: its wait status); before the wait status itself. */
void crash_report_if(int fd, int status);

/* Writes an ELF core of process pid, whose thread tid is in a
 * signal-delivery stop for si, to fd from its start: at most max bytes,
 * their number in *size (core.c). sized: fd has its size already (a
 * sealed memfd), else it is set. 0 or -errno. */
int core_write(int fd, pid_t pid, pid_t tid, const siginfo_t *si, uint64_t max, bool sized, uint64_t *size);
/* Fills c's frames with the backtrace of thread tid in the core on
 * core_fd, in a child under the gadget's filter (symbolise.c). */
void crash_symbolise(const struct sandbox_config *cfg, int core_fd, pid_t tid, struct crash_info *c);
