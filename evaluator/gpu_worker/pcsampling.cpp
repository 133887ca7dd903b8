// CUPTI PC sampling (pcsampling.h).
#include "evaluator/gpu_worker/pcsampling.h"

#include <cuda.h> // CUcontext type only; the entry point comes through the runtime (no libcuda)
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_pcsampling.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <vector>

namespace kloop::gpu {

namespace {

using nlohmann::json;

struct CuptiError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void cupti(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  throw CuptiError(std::string(what) + ": " + (text ? text : "unknown CUPTI error"));
}

CUcontext current_context() {
  using Fn = CUresult (*)(CUcontext*);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &q) !=
          cudaSuccess ||
      !fn) {
    throw CuptiError("cuCtxGetCurrent not available through the runtime");
  }
  CUcontext ctx = nullptr;
  if (reinterpret_cast<Fn>(fn)(&ctx) != CUDA_SUCCESS || !ctx) {
    throw CuptiError("no current CUDA context");
  }
  return ctx;
}

// Owner of a CUpti_PCSamplingData buffer with `pcs` PCs of `reasons` stall slots each.
struct SampleBuffer {
  CUpti_PCSamplingData data{};
  std::vector<CUpti_PCSamplingPCData> pcs;
  std::vector<std::vector<CUpti_PCSamplingStallReason>> stalls;
  SampleBuffer(std::size_t n, std::size_t reasons) : pcs(n), stalls(n) {
    data.size = sizeof(CUpti_PCSamplingData);
    data.collectNumPcs = n;
    data.pPcData = pcs.data();
    for (std::size_t i = 0; i < n; ++i) {
      stalls[i].resize(reasons);
      pcs[i].size = sizeof(CUpti_PCSamplingPCData);
      pcs[i].stallReason = stalls[i].data();
    }
  }
};

struct PcKey {
  std::string function;
  std::uint64_t offset;
  bool operator<(const PcKey& o) const {
    return function != o.function ? function < o.function : offset < o.offset;
  }
};

} // namespace

json pc_sample(const std::function<void()>& launch, int iterations, const std::string& cubin,
               const PcSampleOptions& opt) {
  json out{{"sampling_period", opt.sampling_period}, {"cupti_api", "cupti_pcsampling.h"}};
  CUcontext ctx = nullptr;
  bool enabled = false;
  try {
    ctx = current_context();
    CUpti_PCSamplingEnableParams en{CUpti_PCSamplingEnableParamsSize};
    en.ctx = ctx;
    cupti(cuptiPCSamplingEnable(&en), "cuptiPCSamplingEnable");
    enabled = true;
    size_t nreasons = 0;
    CUpti_PCSamplingGetNumStallReasonsParams nr{CUpti_PCSamplingGetNumStallReasonsParamsSize};
    nr.ctx = ctx;
    nr.numStallReasons = &nreasons;
    cupti(cuptiPCSamplingGetNumStallReasons(&nr), "cuptiPCSamplingGetNumStallReasons");
    std::vector<std::uint32_t> index(nreasons);
    std::vector<std::vector<char>> names(nreasons,
                                         std::vector<char>(CUPTI_STALL_REASON_STRING_SIZE));
    std::vector<char*> name_ptrs(nreasons);
    for (size_t i = 0; i < nreasons; ++i)
      name_ptrs[i] = names[i].data();
    CUpti_PCSamplingGetStallReasonsParams sr{CUpti_PCSamplingGetStallReasonsParamsSize};
    sr.ctx = ctx;
    sr.numStallReasons = nreasons;
    sr.stallReasonIndex = index.data();
    sr.stallReasons = name_ptrs.data();
    cupti(cuptiPCSamplingGetStallReasons(&sr), "cuptiPCSamplingGetStallReasons");
    std::map<std::uint32_t, std::string> reason_name;
    for (size_t i = 0; i < nreasons; ++i)
      reason_name[index[i]] = names[i].data();

    SampleBuffer buf(opt.max_pcs, nreasons);
    CUpti_PCSamplingConfigurationInfo cfg[5] = {};
    cfg[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
    cfg[0].attributeData.samplingPeriodData.samplingPeriod = opt.sampling_period;
    cfg[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
    cfg[1].attributeData.stallReasonData.stallReasonCount = nreasons;
    cfg[1].attributeData.stallReasonData.pStallReasonIndex = index.data();
    cfg[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
    cfg[2].attributeData.samplingDataBufferData.samplingDataBuffer = &buf.data;
    cfg[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
    cfg[3].attributeData.collectionModeData.collectionMode =
        CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED;
    cfg[4].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
    cfg[4].attributeData.enableStartStopControlData.enableStartStopControl = 1;
    CUpti_PCSamplingConfigurationInfoParams cp{CUpti_PCSamplingConfigurationInfoParamsSize};
    cp.ctx = ctx;
    cp.numAttributes = 5;
    cp.pPCSamplingConfigurationInfo = cfg;
    cupti(cuptiPCSamplingSetConfigurationAttribute(&cp),
          "cuptiPCSamplingSetConfigurationAttribute");

    CUpti_PCSamplingStartParams st{CUpti_PCSamplingStartParamsSize};
    st.ctx = ctx;
    cupti(cuptiPCSamplingStart(&st), "cuptiPCSamplingStart");
    for (int i = 0; i < iterations; ++i)
      launch();
    cudaDeviceSynchronize();
    CUpti_PCSamplingStopParams sp{CUpti_PCSamplingStopParamsSize};
    sp.ctx = ctx;
    cupti(cuptiPCSamplingStop(&sp), "cuptiPCSamplingStop");

    // Accumulate what is in the configured buffer, then drain what CUPTI still holds.
    std::map<std::string, std::uint64_t> histogram;
    std::map<PcKey, std::map<std::string, std::uint64_t>> per_pc;
    std::uint64_t total = 0, dropped = 0;
    auto absorb = [&](const CUpti_PCSamplingData& d) {
      total += d.totalSamples;
      dropped += d.droppedSamples;
      for (size_t i = 0; i < d.totalNumPcs && i < opt.max_pcs; ++i) {
        const CUpti_PCSamplingPCData& pc = d.pPcData[i];
        const PcKey key{pc.functionName ? pc.functionName : "?", pc.pcOffset};
        for (size_t k = 0; k < pc.stallReasonCount; ++k) {
          const std::string& name = reason_name[pc.stallReason[k].pcSamplingStallReasonIndex];
          histogram[name] += pc.stallReason[k].samples;
          per_pc[key][name] += pc.stallReason[k].samples;
        }
      }
    };
    absorb(buf.data);
    for (int guard = 0; guard < 64; ++guard) {
      SampleBuffer more(opt.max_pcs, nreasons);
      CUpti_PCSamplingGetDataParams gd{CUpti_PCSamplingGetDataParamsSize};
      gd.ctx = ctx;
      gd.pcSamplingData = &more.data;
      if (cuptiPCSamplingGetData(&gd) != CUPTI_SUCCESS || more.data.totalNumPcs == 0) break;
      absorb(more.data);
    }
    // Top PCs by samples, with source lines from the cubin's line table.
    std::vector<std::pair<std::uint64_t, PcKey>> order;
    for (const auto& [key, m] : per_pc) {
      std::uint64_t n = 0;
      for (const auto& [_, c] : m)
        n += c;
      order.push_back({n, key});
    }
    std::sort(order.begin(), order.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    json top = json::array();
    for (std::size_t i = 0; i < order.size() && static_cast<int>(i) < opt.top_pcs; ++i) {
      const PcKey& key = order[i].second;
      json item{{"function", key.function},
                {"pc_offset", key.offset},
                {"samples", order[i].first},
                {"stalls", per_pc[key]},
                {"file", ""},
                {"line", 0}};
      CUpti_GetSassToSourceCorrelationParams sc{CUpti_GetSassToSourceCorrelationParamsSize};
      sc.cubin = cubin.data();
      sc.cubinSize = cubin.size();
      sc.functionName = key.function.c_str();
      sc.pcOffset = key.offset;
      if (!cubin.empty() && cuptiGetSassToSourceCorrelation(&sc) == CUPTI_SUCCESS) {
        item["file"] = sc.fileName ? sc.fileName : "";
        item["line"] = sc.lineNumber;
        std::free(sc.fileName);
        std::free(sc.dirName);
      }
      top.push_back(item);
    }
    out["status"] = "ok";
    out["reason"] = "";
    out["total_samples"] = total;
    out["dropped_samples"] = dropped;
    out["stall_reasons"] = histogram;
    out["top_pcs"] = top;
  } catch (const CuptiError& e) {
    out["status"] = "not_run";
    out["reason"] = e.what();
  }
  if (enabled) {
    CUpti_PCSamplingDisableParams dp{CUpti_PCSamplingDisableParamsSize};
    dp.ctx = ctx;
    cuptiPCSamplingDisable(&dp);
  }
  return out;
}

} // namespace kloop::gpu
