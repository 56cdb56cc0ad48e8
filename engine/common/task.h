/*
 * What an engine serves: llm_engine's task (docs/directives.md), the
 * engine's --task. Its meaning for a model is model/score.h's
 * llm_model_task.
 *
 * defines: llm_task, llm_task_name
 */
#ifndef NGX_LLM_TASK_H
#define NGX_LLM_TASK_H

enum llm_task {
    LLM_TASK_AUTO = 0,          /* as the model's metadata says */
    LLM_TASK_GENERATE = 1,
    LLM_TASK_EMBED = 2,
    LLM_TASK_SCORE = 3,
};

/* "auto", "generate", "embed", "score"; NULL past the enum */
static inline const char *
llm_task_name(int task)
{
    static const char *const  names[] = {
        "auto", "generate", "embed", "score"
    };

    return task >= 0 && task <= LLM_TASK_SCORE ? names[task] : NULL;
}

#endif /* NGX_LLM_TASK_H */
