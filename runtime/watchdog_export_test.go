package runtime

// MaxPipeline is the most commands one renewal pipeline carries.
const MaxPipeline = maxPipeline
