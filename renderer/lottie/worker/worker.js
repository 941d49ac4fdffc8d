// framefarm's Lottie worker: renders Lottie animations frame by frame with Skia's Skottie.
//
// One long-lived process per render slot, driven by the Go render node. Requests arrive as JSON
// lines on stdin; answers leave as JSON lines on stdout. Frames, raw RGBA, are written to the
// named pipe each request gives (ffmpeg reads the other end), never to stdout.
//
//   -> {"id": 1, "file": "/work/anim.json", "out": "/work/frames.fifo", "width": 960, "height": 540,
//       "from": 0, "to": 299}
//   <- {"id": 1, "type": "info", "frames": 300, "fps": 30, "width": 1920, "height": 1080}
//   <- {"id": 1, "type": "frame", "frame": 0}            (one per frame written)
//   <- {"id": 1, "type": "done"}  or  {"id": 1, "type": "error", "message": "..."}
'use strict'

const fs = require('fs')
const readline = require('readline')
const { LottieAnimation, createCanvas } = require('@napi-rs/canvas')

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + '\n')
}

// Each frame's pixels are a fresh native buffer that Node frees only from the event loop, so the
// loop yields after every frame; rendering synchronously would hold every frame in memory.
const yieldToEventLoop = () => new Promise((resolve) => setImmediate(resolve))

async function render(req) {
  const animation = LottieAnimation.loadFromFile(req.file)
  const width = req.width || animation.width
  const height = req.height || animation.height
  // Skottie counts frames as duration times rate in single precision: 61 frames at 29.97 fps
  // come out as 60.999998, whose floor would drop the last frame. The count is whole.
  const frames = Math.round(animation.frames)
  send({ id: req.id, type: 'info', frames, fps: animation.fps, width: animation.width, height: animation.height })
  const from = req.from | 0
  const to = req.to === undefined ? frames - 1 : req.to | 0
  if (from < 0 || to < from || to >= frames) {
    throw new Error(`frames ${req.from} to ${req.to} are outside the animation's ${frames} frames`)
  }
  const canvas = createCanvas(width, height)
  const ctx = canvas.getContext('2d')
  const dst = { x: 0, y: 0, width, height }
  const out = fs.openSync(req.out, 'w')
  try {
    for (let frame = from; frame <= to; frame++) {
      ctx.clearRect(0, 0, width, height)
      animation.seekFrame(frame)
      animation.render(ctx, dst)
      const pixels = canvas.data()
      let written = 0
      while (written < pixels.length) {
        written += fs.writeSync(out, pixels, written, pixels.length - written)
      }
      send({ id: req.id, type: 'frame', frame })
      await yieldToEventLoop()
    }
  } finally {
    fs.closeSync(out)
  }
}

async function serve() {
  send({ type: 'ready', versions: { node: process.versions.node } })
  // Requests are served one at a time, in order: the Go side sends the next after an answer.
  for await (const line of readline.createInterface({ input: process.stdin })) {
    let req
    try {
      req = JSON.parse(line)
    } catch (e) {
      send({ type: 'error', message: 'request is not JSON: ' + e.message })
      continue
    }
    try {
      await render(req)
      send({ id: req.id, type: 'done' })
    } catch (e) {
      send({ id: req.id, type: 'error', message: String(e && e.message ? e.message : e) })
    }
  }
  process.exit(0)
}

serve()
