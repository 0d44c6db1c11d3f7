// A table's entry for a key that came from outside: a config.json's model_type, a safetensors header's dtype, a
// recipe's flag, a label of a server's /metrics, a line of lscpu. A plain object also answers for what every object
// inherits (toString, constructor, __proto__, hasOwnProperty), so a config whose model_type is "constructor" read a
// function where a row was meant, and crashed or planned with it. Only the table's own entries count.

/** The table's own entry for `key`, or undefined (never an inherited property). */
export function own<T>(table: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(table, key) ? table[key] : undefined;
}
