/*
 * NVML by dlopen (gpu_stats.h says why). The few entry points are
 * declared here with NVML's C types: nvmlDevice_t is a pointer,
 * nvmlReturn_t an int where 0 is NVML_SUCCESS, the structs are NVML's
 * nvmlUtilization_t and nvmlMemory_t.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "backend/gpu_stats.h"

typedef struct {
    unsigned int        gpu;        /* percent of the period a kernel ran */
    unsigned int        memory;
} nvml_utilization;

typedef struct {
    unsigned long long  total;
    unsigned long long  free;
    unsigned long long  used;
} nvml_memory;

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_by_pci_fn)(const char *pci, void **dev);
typedef int (*nvml_util_fn)(void *dev, nvml_utilization *u);
typedef int (*nvml_mem_fn)(void *dev, nvml_memory *m);

static pthread_once_t   nvml_once = PTHREAD_ONCE_INIT;
static nvml_by_pci_fn   nvml_by_pci;
static nvml_util_fn     nvml_util;
static nvml_mem_fn      nvml_mem;


static void
nvml_load(void)
{
    void          *lib;
    nvml_init_fn   init;

    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        return;
    }

    init = (nvml_init_fn) dlsym(lib, "nvmlInit_v2");
    nvml_by_pci = (nvml_by_pci_fn) dlsym(lib,
                                         "nvmlDeviceGetHandleByPciBusId_v2");
    nvml_util = (nvml_util_fn) dlsym(lib, "nvmlDeviceGetUtilizationRates");
    nvml_mem = (nvml_mem_fn) dlsym(lib, "nvmlDeviceGetMemoryInfo");

    if (init == NULL || nvml_by_pci == NULL || nvml_util == NULL
        || nvml_mem == NULL || init() != 0)
    {
        nvml_by_pci = NULL;     /* llm_nvml_read reports nothing */
    }
}


int
llm_nvml_read(const char *pci, int *util_percent, uint64_t *mem_used,
    uint64_t *mem_total)
{
    void              *dev;
    nvml_memory        m;
    nvml_utilization   u;

    pthread_once(&nvml_once, nvml_load);

    if (nvml_by_pci == NULL || nvml_by_pci(pci, &dev) != 0
        || nvml_util(dev, &u) != 0 || nvml_mem(dev, &m) != 0)
    {
        return -1;
    }

    *util_percent = (int) u.gpu;
    *mem_used = m.used;
    *mem_total = m.total;
    return 0;
}
