/*
 * Linked into the engine and the unit tests of `make test-asan` only. nginx
 * starts the engine with an empty environment (ngx_http_llm_peer.c), so
 * ASAN_OPTIONS cannot reach it: these are its options. Reports go to files
 * that the make target collects and fails on, not to the engine's stderr
 * (nginx's error log, rewritten for every Test::Nginx block). An
 * ASAN_OPTIONS or UBSAN_OPTIONS in the environment overrides them.
 */

const char *__asan_default_options(void);
const char *__ubsan_default_options(void);
const char *__lsan_default_options(void);


__attribute__((weak)) const char *
__asan_default_options(void)
{
    return "detect_leaks=1:halt_on_error=1:log_path=" NGX_LLM_SAN_LOG;
}


__attribute__((weak)) const char *
__ubsan_default_options(void)
{
    return "print_stacktrace=1:halt_on_error=1:log_path=" NGX_LLM_SAN_LOG;
}


__attribute__((weak)) const char *
__lsan_default_options(void)
{
    return "report_objects=1";
}
