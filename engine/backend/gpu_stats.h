/*
 * NVML, loaded at run time: a device's utilisation and memory for
 * /metrics. The driver's libnvidia-ml.so.1 is opened on first use (no
 * header or link-time library: the toolkit does not ship them everywhere),
 * so an engine where it is missing still runs and reports nothing.
 *
 * Not named nvml.h: NVIDIA's header has that name.
 *
 * defines: llm_nvml_read
 */
#ifndef NGX_LLM_GPU_STATS_H
#define NGX_LLM_GPU_STATS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* the device whose PCI bus id is pci ("0000:17:00.0", as
 * cudaDeviceGetPCIBusId writes it): 0, or -1 when NVML is not there or
 * does not know it */
int llm_nvml_read(const char *pci, int *util_percent, uint64_t *mem_used,
    uint64_t *mem_total);

#ifdef __cplusplus
}
#endif

#endif
