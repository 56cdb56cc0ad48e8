/*
 * Preloaded into nginx by make test-asan, after the ASan runtime: nginx
 * unloads its dynamic modules when it frees a cycle, before LeakSanitizer
 * looks at the heap at exit, and a leak's stack in an unloaded module
 * reads "<unknown module>". Keeping them mapped keeps the names.
 */
int dlclose(void *handle);


int
dlclose(void *handle)
{
    (void) handle;
    return 0;
}

