/*
 * Priority classes: the one home of what the ring slot's `priority`
 * (int64, lower runs first) means to the scheduler (docs/scheduler.md).
 *
 * A class is a band of priority values: priority / LLM_PRIORITY_BAND
 * (rounded toward minus infinity). Within a class the value still orders
 * FCFS ties, but the scheduler treats a class as one unit: admission and
 * step composition by class (lower first), preemption of the highest
 * class number first, fairness across fair_keys inside a class, and
 * classes >= LLM_PRIORITY_BATCH's give way while a lower one has work.
 *
 *   llm_priority interactive  ->  LLM_PRIORITY_INTERACTIVE (0, class 0)
 *   llm_priority batch        ->  LLM_PRIORITY_BATCH (100, class 1)
 *   llm_priority N            ->  N (its class: N / 100)
 *
 * The API's "priority" (vLLM extension, -2^31..2^31-1) lands in the same
 * field; a client may only lower its own priority: the slot gets the
 * larger of the location's llm_priority and the body's value (the nginx
 * side's rule). Within a class the value orders first (0 before 5, as
 * vLLM's priority), then fairness across keys. Constants only: every layer may
 * include it.
 *
 * defines: LLM_PRIORITY_INTERACTIVE, LLM_PRIORITY_BATCH,
 *          LLM_PRIORITY_BAND, llm_priority_class
 */
#ifndef NGX_LLM_PRIORITY_H
#define NGX_LLM_PRIORITY_H

#include <stdint.h>

#define LLM_PRIORITY_INTERACTIVE    0
#define LLM_PRIORITY_BATCH          100
#define LLM_PRIORITY_BAND           100     /* values per class */

/* the class of a priority value: floor(priority / LLM_PRIORITY_BAND) */
static inline int64_t
llm_priority_class(int64_t priority)
{
    int64_t  c = priority / LLM_PRIORITY_BAND;

    return (priority % LLM_PRIORITY_BAND < 0) ? c - 1 : c;
}

#endif
