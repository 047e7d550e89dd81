/* frames: gadgetctl trace NAME — a gadget's frames on its channel, decoded
 * and bounded, followed live by root (frames.c). The control socket keeps
 * one struct frames, a listener of the core's units. */
#pragma once

struct core;
struct client;
struct frames;
struct frame_follower;

/* Listens to core's units (after the first core_add is fine: it keeps no
 * slot). 0 or -errno. Freed by frames_free, after core_close. */
int frames_open(struct core *core, struct frames **out);
void frames_free(struct frames *fs);
/* The client's connection drained: its next part may go. */
void frames_kick(struct frame_follower *f);
/* The client goes: its following ends. */
void frames_client_gone(struct client *cl);
