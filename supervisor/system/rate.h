/* rate: a budget a second as a leaky bucket — what a party used drains at
 * the budget a second, and past the budget the party waits until it has
 * drained back to it. Over any span the party gets at most the budget a
 * second, plus one budget at once. Pure code: the caller passes the time
 * (monotime_ms) and does the waiting (holds the party's input). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct rate {
        uint64_t per_s;    /* the budget a second; 0: none */
        uint64_t at_ms;    /* when level_m was last drained */
        uint64_t level_m;  /* what was used and has not drained, in thousandths */
};

void rate_init(struct rate *r, uint64_t per_s, uint64_t now_ms);
/* Counts n used at now_ms. 0 while within the budget; past it, the ms
 * until the bucket has drained back to the budget (at least 1). */
uint64_t rate_add(struct rate *r, uint64_t n, uint64_t now_ms);
/* Counts n used at now_ms only if that stays within the budget: true if
 * counted (a request refused is not counted). */
bool rate_try(struct rate *r, uint64_t n, uint64_t now_ms);
/* What is in the bucket at now_ms (drained as of then). */
uint64_t rate_level(struct rate *r, uint64_t now_ms);
