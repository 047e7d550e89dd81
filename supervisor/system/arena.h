/* arena: the memory one decoded frame is unpacked into (protobuf-c's
 * ProtobufCAllocator). A frame's many small objects are cut from chunks
 * the arena keeps from frame to frame, and all given back at once by
 * arena_reset, so that a frame of FrameValuesMax values costs gadgetd no
 * malloc and free per value and, once the chunks are there, no page
 * faults: with malloc, each such frame's memory was handed back to the
 * kernel and faulted in again by the next (on a VM where a fault is
 * dear, 120 ms of gadgetd's loop per frame). Between frames the arena
 * keeps one chunk, big enough for the last frame, of at most ARENA_KEEP (a
 * frame of FrameValuesMax values unpacks into about 8 MiB): gadgetd's
 * memory keeps what a big frame took, once, not once per gadget.
 * One arena per thread that decodes (the loop's: peer.c). */
#pragma once

#include <stddef.h>
#include <sys/queue.h>
#include <protobuf-c/protobuf-c.h>

/* What the arena keeps between frames, at most. */
#define ARENA_KEEP (16u << 20)

struct arena_chunk {
        SLIST_ENTRY(arena_chunk) link;
        size_t size, used;            /* of data */
        _Alignas(16) unsigned char data[];
};

struct arena {
        SLIST_HEAD(, arena_chunk) chunks; /* the newest first; zeroed: empty */
        size_t kept;                  /* bytes of all its chunks */
        ProtobufCAllocator pb;        /* for *_unpack and *_free_unpacked */
};

void arena_init(struct arena *a);
/* Everything cut since the last reset is gone; one chunk as big as all
 * the frame took is kept for the next frame, if within ARENA_KEEP. */
void arena_reset(struct arena *a);
/* Frees every chunk. */
void arena_release(struct arena *a);
