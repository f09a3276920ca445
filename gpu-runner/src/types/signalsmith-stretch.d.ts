// The package ships no types; we only import it for its side effect (see engines/dsp/signalsmith-stretch.ts).
declare module "signalsmith-stretch";
