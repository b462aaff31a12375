// A deliberately small GraphQL reader: one operation (query or mutation), optional name and
// variable definitions, fields with aliases, arguments (variables or literals) and nested
// selections. No fragments or directives. Enough for the provider's management calls, and strict
// enough that selecting a field the provider does not have fails, as it would for real.

export interface Field {
  alias?: string;
  name: string;
  args: Record<string, unknown>;
  selections?: Field[];
}

export interface Operation {
  kind: "query" | "mutation";
  selections: Field[];
}

export class GraphQLSyntaxError extends Error {}

type Token = { kind: "punct" | "name" | "string" | "number"; text: string };

const TOKEN =
  /\s+|,|#[^\n]*|(\.\.\.|[{}()[\]:!$=@])|([_A-Za-z][_0-9A-Za-z]*)|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|("(?:[^"\\\n]|\\.)*")/y;

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < source.length) {
    const at = TOKEN.lastIndex;
    const m = TOKEN.exec(source);
    if (m === null) throw new GraphQLSyntaxError(`Syntax Error: Unexpected character at ${at}.`);
    if (m[1] !== undefined) tokens.push({ kind: "punct", text: m[1] });
    else if (m[2] !== undefined) tokens.push({ kind: "name", text: m[2] });
    else if (m[3] !== undefined) tokens.push({ kind: "number", text: m[3] });
    else if (m[4] !== undefined) tokens.push({ kind: "string", text: m[4] });
  }
  return tokens;
}

export function parseOperation(source: string, variables: Record<string, unknown> = {}): Operation {
  const tokens = tokenize(source);
  const vars = { ...variables };
  let i = 0;
  const peek = () => tokens[i];
  const isPunct = (text: string) => peek()?.kind === "punct" && peek()?.text === text;
  const next = (): Token => {
    const t = tokens[i++];
    if (t === undefined) throw new GraphQLSyntaxError("Syntax Error: Unexpected <EOF>.");
    return t;
  };
  const expect = (text: string) => {
    const t = next();
    if (t.text !== text || t.kind !== "punct")
      throw new GraphQLSyntaxError(`Syntax Error: Expected "${text}", found "${t.text}".`);
  };
  const name = (): string => {
    const t = next();
    if (t.kind !== "name") throw new GraphQLSyntaxError(`Syntax Error: Expected Name, found "${t.text}".`);
    return t.text;
  };

  const parseType = (): void => {
    if (isPunct("[")) {
      next();
      parseType();
      expect("]");
    } else name();
    if (isPunct("!")) next();
  };

  const parseValue = (): unknown => {
    const t = next();
    if (t.kind === "punct" && t.text === "$") {
      const v = vars[name()];
      return v === undefined ? null : v;
    }
    if (t.kind === "string") return JSON.parse(t.text) as string;
    if (t.kind === "number") return Number(t.text);
    if (t.kind === "name")
      return t.text === "true" ? true : t.text === "false" ? false : t.text === "null" ? null : t.text;
    if (t.text === "[") {
      const list: unknown[] = [];
      while (!isPunct("]")) list.push(parseValue());
      next();
      return list;
    }
    if (t.text === "{") {
      const obj: Record<string, unknown> = {};
      while (!isPunct("}")) {
        const key = name();
        expect(":");
        obj[key] = parseValue();
      }
      next();
      return obj;
    }
    throw new GraphQLSyntaxError(`Syntax Error: Unexpected "${t.text}".`);
  };

  const parseSelectionSet = (): Field[] => {
    expect("{");
    const fields: Field[] = [];
    while (!isPunct("}")) {
      if (isPunct("...") || isPunct("@"))
        throw new GraphQLSyntaxError("Fragments and directives are not supported.");
      let fieldName = name();
      let alias: string | undefined;
      if (isPunct(":")) {
        next();
        alias = fieldName;
        fieldName = name();
      }
      const args: Record<string, unknown> = {};
      if (isPunct("(")) {
        next();
        while (!isPunct(")")) {
          const argName = name();
          expect(":");
          args[argName] = parseValue();
        }
        next();
      }
      const field: Field = { name: fieldName, args, ...(alias !== undefined && { alias }) };
      if (isPunct("{")) field.selections = parseSelectionSet();
      fields.push(field);
    }
    next();
    if (fields.length === 0) throw new GraphQLSyntaxError('Syntax Error: Expected Name, found "}".');
    return fields;
  };

  let kind: Operation["kind"] = "query";
  const first = peek();
  if (first?.kind === "name") {
    if (first.text !== "query" && first.text !== "mutation") {
      throw new GraphQLSyntaxError(`Syntax Error: Unexpected Name "${first.text}".`);
    }
    kind = first.text;
    next();
    if (peek()?.kind === "name") next();
    if (isPunct("(")) {
      next();
      while (!isPunct(")")) {
        expect("$");
        const varName = name();
        expect(":");
        parseType();
        if (isPunct("=")) {
          next();
          const dflt = parseValue();
          if (vars[varName] === undefined) vars[varName] = dflt;
        }
      }
      next();
    }
  }
  const selections = parseSelectionSet();
  if (i !== tokens.length) throw new GraphQLSyntaxError("Syntax Error: Only one operation is supported.");
  return { kind, selections };
}

/** Field types for validation: an object type name, or null for a scalar (or scalar list). */
export type Schema = Record<string, Record<string, string | null>>;

/** Checks selections against the schema before anything executes, like a GraphQL server does. */
export function validate(schema: Schema, typeName: string, selections: Field[]): string | undefined {
  const type = schema[typeName] ?? {};
  for (const f of selections) {
    if (!(f.name in type)) return `Cannot query field "${f.name}" on type "${typeName}".`;
    const fieldType = type[f.name] ?? null;
    if (fieldType === null && f.selections !== undefined) {
      return `Field "${f.name}" must not have a selection since its type is a scalar.`;
    }
    if (fieldType !== null) {
      if (f.selections === undefined)
        return `Field "${f.name}" of type "${fieldType}" must have a selection of subfields.`;
      const inner = validate(schema, fieldType, f.selections);
      if (inner !== undefined) return inner;
    }
  }
  return undefined;
}

/** Keeps only the selected fields of a value (objects, lists of objects, scalars). */
export function project(value: unknown, selections: Field[] | undefined): unknown {
  if (selections === undefined || value === null || value === undefined) return value ?? null;
  if (Array.isArray(value)) return value.map((v) => project(v, selections));
  const obj = value as Record<string, unknown>;
  return Object.fromEntries(selections.map((f) => [f.alias ?? f.name, project(obj[f.name], f.selections)]));
}
