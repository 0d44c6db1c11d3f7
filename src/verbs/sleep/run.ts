export { run } from '../sleeping.js';
