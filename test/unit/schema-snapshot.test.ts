import { it, expect } from 'vitest';
import { profileJsonSchema } from '../../src/verbs/profiles/run.js';

// Editors complete profile files from this schema: a change to it is a change to a public format.
it('the profile JSON Schema is pinned', async () => {
  await expect(JSON.stringify(profileJsonSchema(), null, 2)).toMatchFileSnapshot('../fixtures/profile.schema.json');
});
