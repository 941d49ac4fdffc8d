package main

import (
	"log/slog"
	"os"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/aerender"
	"github.com/framefarm/framefarm/renderer/ffmpeg"
	"github.com/framefarm/framefarm/renderer/lottie"
)

// startEngines builds the engines this machine can run. A missing tool is logged with what to
// install and its engine left out: jobs for it wait for a node that has it. stop ends the
// engines' long-lived processes.
func startEngines(cfg EnginesConfig, log *slog.Logger) (engines []renderer.Renderer, stop func()) {
	stop = func() {}
	tools, err := ffmpeg.Find(cfg.FFmpeg, cfg.FFprobe)
	if err != nil {
		log.Warn("no engine can encode: the lottie, join and After Effects engines are off", "err", err)
		return nil, stop
	}
	engines = append(engines, &ffmpeg.Joiner{Tools: tools})
	executable, _ := os.Executable()
	worker, looked := cfg.lottieWorker(executable)
	if l, err := lottie.New(lottie.Config{Node: cfg.Node, WorkerDir: worker, Tools: tools, Logger: log}); err != nil {
		log.Warn("the lottie engine is off; set engines.lottie_worker to the worker's folder (renderer/lottie/worker of the source, after make setup)",
			"err", err, "looked_in", looked)
	} else {
		engines, stop = append(engines, l), l.Close
	}
	fonts := cfg.FontsDir
	if fonts == "" {
		fonts = aerender.DefaultFontsDir()
	}
	for engine, ae := range map[string]AEConfig{renderer.EngineAE2025: cfg.AE2025, renderer.EngineAE2026: cfg.AE2026} {
		if ae.Aerender == "" {
			continue
		}
		r, err := aerender.New(aerender.Config{Engine: engine, Aerender: ae.Aerender, OutputModule: ae.OutputModule, Extension: ae.Extension,
			RenderSettings: ae.RenderSettings, DraftSettings: ae.DraftSettings, FontsDir: fonts, Tools: tools})
		if err != nil {
			log.Warn("an After Effects engine is off", "engine", engine, "err", err)
			continue
		}
		engines = append(engines, r)
	}
	return engines, stop
}
